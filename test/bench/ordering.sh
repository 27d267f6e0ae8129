#!/usr/bin/env bash
# IDs that rise across the cluster (issue 14), on three local nodes (one
# machine, fsync on): pgbench -M prepared, SELECT hilo_nextval('q') of a
# sequence with ordering => 'quorum', at 2, 8 and 32 clients, against
# SELECT 1 and hilo_nextval of a sequence with the default ordering ('none')
# on the same node, side by side, ROUNDS interleaved rounds of
# SECONDS_PER_RUN each. Also 'quorum' with the clients spread over all three
# nodes at once (IDs per second over the cluster). Medians and spreads;
# writes docs/bench/ordering.md.
#
#   test/bench/ordering.sh                               3 rounds of 5 s
#   ROUNDS=1 SECONDS_PER_RUN=3 test/bench/ordering.sh    a quick run
source "$(dirname "$0")/lib.sh"
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${SECONDS_PER_RUN:-5}
CLIENT_COUNTS=${CLIENT_COUNTS:-"2 8 32"}
NODES=3
DOC=${BENCH_DOC:-$HILO_ROOT/docs/bench/ordering.md}

ensure_packages
build_and_install

HILO_NODE_PORT=54500
start_nodes "$NODES" "max_connections = 250" "hilo.claim_timeout = '2s'" \
    "hilo.agent_database = 'postgres'" "hilo.agent_interval = '1s'"
for k in $(seq 0 $((NODES - 1))); do
    on 0 -c "SELECT hilo_add_node('node$k', '$(conninfo "$k")')" >/dev/null
done
on 0 -c "SELECT hilo_create('q', ordering => 'quorum')" >/dev/null
on 0 -c "SELECT hilo_create('plain')" >/dev/null
for k in $(seq 0 $((NODES - 1))); do
    for _ in $(seq 1 60); do
        [ "$(on "$k" -c "SELECT count(*) FROM hilo.sequences WHERE name IN ('q', 'plain')")" = 2 ] && break
        sleep 1
    done
done

WORK=$(mktemp -d)
chmod 755 "$WORK"
echo "SELECT 1;" >"$WORK/select1.sql"
echo "SELECT hilo_nextval('plain');" >"$WORK/plain.sql"
echo "SELECT hilo_nextval('q');" >"$WORK/quorum.sql"

# pgbench on node k: prints tps (0 and the error on failure).
bench() {
    local k=$1 script=$2 clients=$3 out
    out=$(as_pg "$PG_BIN/pgbench" -n -M prepared -c "$clients" -j 2 -T "$SECONDS_PER_RUN" \
        -f "$WORK/$script.sql" -h "${NODE_DIR[$k]}" -p "${NODE_PORT[$k]}" postgres 2>&1)
    if grep -q "aborted\|ERROR" <<<"$out"; then
        grep -m1 "ERROR\|aborted" <<<"$out" >&2
    fi
    sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out"
}
# 'quorum' with the clients spread over the three nodes at once: the sum.
bench_spread() {
    local clients=$1 pids=() total=0 k per
    for k in $(seq 0 $((NODES - 1))); do
        per=$(( (clients + NODES - 1 - k) / NODES ))
        [ "$per" -gt 0 ] || continue
        (bench "$k" quorum "$per" >"$WORK/spread$k") &
        pids+=($!)
    done
    wait "${pids[@]}"
    for k in $(seq 0 $((NODES - 1))); do
        [ -s "$WORK/spread$k" ] && total=$(echo "$total + $(cat "$WORK/spread$k")" | bc -l)
    done
    echo "$total"
}

declare -A tps
for round in $(seq 1 "$ROUNDS"); do
    for c in $CLIENT_COUNTS; do
        log "round $round, $c clients"
        tps[select1,$c]+="$(bench 0 select1 "$c") "
        tps[plain,$c]+="$(bench 0 plain "$c") "
        tps[quorum,$c]+="$(bench 0 quorum "$c") "
        tps[spread,$c]+="$(bench_spread "$c") "
    done
done

{
    echo "# IDs that rise across the cluster: ordering => 'quorum'"
    echo
    echo "Written by \`test/bench/ordering.sh\` (ROUNDS=$ROUNDS SECONDS_PER_RUN=$SECONDS_PER_RUN)"
    echo "on $(date -u +%Y-%m-%d), commit $(git -C "$HILO_ROOT" rev-parse --short HEAD),"
    echo "PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), $(nproc) cores, load average"
    echo "$(cut -d' ' -f1-3 /proc/loadavg) at the end. Three nodes on this one machine, fsync on;"
    echo "pgbench -M prepared, one statement per transaction. Every round runs"
    echo "every row once, in turn; median over the rounds, spread (min..max) beside it."
    echo
    echo "| clients | SELECT 1 tps | hilo_nextval, ordering 'none' | ratio | hilo_nextval, 'quorum', one node | ratio | 'quorum', clients over 3 nodes, IDs/s |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    for c in $CLIENT_COUNTS; do
        s=$(median <<<"${tps[select1,$c]}")
        p=$(median <<<"${tps[plain,$c]}")
        qq=$(median <<<"${tps[quorum,$c]}")
        sp=$(median <<<"${tps[spread,$c]}")
        printf "| %d | %.0f (%s) | %.0f (%s) | %.3f | %.0f (%s) | %.3f | %.0f (%s) |\n" "$c" \
            "$s" "$(minmax <<<"${tps[select1,$c]}")" "$p" "$(minmax <<<"${tps[plain,$c]}")" \
            "$(echo "$p / $s" | bc -l)" "$qq" "$(minmax <<<"${tps[quorum,$c]}")" \
            "$(echo "$qq / $s" | bc -l)" "$sp" "$(minmax <<<"${tps[spread,$c]}")"
    done
} >"$DOC.new"
mv "$DOC.new" "$DOC"
cat "$DOC"
