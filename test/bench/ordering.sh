#!/usr/bin/env bash
# IDs that rise across the cluster, on three local nodes (one
# machine, fsync on): pgbench -M prepared, SELECT hilo_nextval('q') of a
# sequence with ordering => 'quorum', at 2, 8 and 32 clients, against
# SELECT 1 and hilo_nextval of a sequence with the default ordering ('none')
# on the same node, side by side, ROUNDS interleaved rounds of
# SECONDS_PER_RUN each. Also 'quorum' with the clients spread over all three
# nodes at once (IDs per second over the cluster). 'cluster' (a leased
# serving node): hilo_nextval('c') from clients on the lease holder and from
# clients on another node (forwarded), against SELECT 1 on each of those
# nodes; at the end the holder's server is killed (kill -9 of every process)
# and the time to the first ID its successor serves is measured. Medians and
# spreads; writes docs/bench/ordering.md.
#
#   test/bench/ordering.sh                               3 rounds of 5 s
#   ROUNDS=1 SECONDS_PER_RUN=3 test/bench/ordering.sh    a quick run
source "$(dirname "$0")/lib.sh"
setting ROUNDS 3
setting SECONDS_PER_RUN 5
setting CLIENT_COUNTS "2 8 32"
NODES=3

ensure_packages
# A private copy of PostgreSQL with this build (scripts/lib.sh): nothing
# system-wide changes under other sessions' servers.
make -C "$HILO_ROOT" -s -j"$(nproc)"
make_pg_dir PRIVATE pg
install_private "$PRIVATE/pg"
chown -R "$PG_USER": "$PRIVATE"

HILO_NODE_PORT=54500
start_nodes "$NODES" "max_connections = 250" "hilo.claim_timeout = '2s'" \
    "hilo.agent_database = 'postgres'" "hilo.agent_interval = '1s'"
for k in $(seq 0 $((NODES - 1))); do
    on 0 -c "SELECT hilo_add_node('node$k', '$(conninfo "$k")')" >/dev/null
done
on 0 -c "SELECT hilo_create('q', ordering => 'quorum')" >/dev/null
on 0 -c "SELECT hilo_create('plain')" >/dev/null
on 0 -c "SELECT hilo_create('c', ordering => 'cluster')" >/dev/null
for k in $(seq 0 $((NODES - 1))); do
    for _ in $(seq 1 60); do
        [ "$(on "$k" -c "SELECT count(*) FROM hilo.sequences WHERE name IN ('q', 'plain', 'c')")" = 3 ] && break
        sleep 1
    done
done
# Node 0 calls first, so it takes the lease; node 1 forwards to it.
for _ in $(seq 1 30); do
    on 0 -c "SELECT hilo_nextval('c')" >/dev/null 2>&1 && break
    sleep 1
done
on 1 -c "SELECT hilo_nextval('c')" >/dev/null
HOLDER_ID=$(on 0 -c "SELECT holder FROM hilo.lease_cells WHERE seq = 'c'")
[ "$HOLDER_ID" = "$(on 0 -c 'SELECT hilo_node_id()')" ] || log "warning: node 0 is not the holder ($HOLDER_ID)"

WORK=$(mktemp -d)
chmod 755 "$WORK"
echo "SELECT 1;" >"$WORK/select1.sql"
echo "SELECT hilo_nextval('plain');" >"$WORK/plain.sql"
echo "SELECT hilo_nextval('q');" >"$WORK/quorum.sql"
echo "SELECT hilo_nextval('c');" >"$WORK/cluster.sql"

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
        tps[holder,$c]+="$(bench 0 cluster "$c") "
        tps[select1b,$c]+="$(bench 1 select1 "$c") "
        tps[forwarded,$c]+="$(bench 1 cluster "$c") "
    done
done

# A table cell: the median of the runs tps[KEY], their spread beside it.
tps_cell() { printf '%.0f (%s)' "$(median <<<"${tps[$1]}")" "$(minmax <<<"${tps[$1]}")"; }
# The ratio of the medians of tps[KEY] and tps[BASE_KEY].
tps_ratio() { printf '%.3f' "$(echo "$(median <<<"${tps[$1]}") / $(median <<<"${tps[$2]}")" | bc -l)"; }

# The holder's death: every process of node 0 killed at once; node 1 calls
# until its successor serves.
log "killing the lease holder (node 0)"
pm=$(head -1 "${NODE_DIR[0]}/data/postmaster.pid")
start=$(date +%s.%N)
kill -9 "$pm" $(ps -o pid= --ppid "$pm") 2>/dev/null || true
until on 1 -c "SELECT hilo_nextval('c')" >/dev/null 2>&1; do sleep 0.02; done
FAILOVER=$(echo "$(date +%s.%N) - $start" | bc -l)
LEASE_TIME=$(on 1 -c "SHOW hilo.lease_time")
DRIFT=$(on 1 -c "SHOW hilo.clock_drift_bound")

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
        echo "| $c | $(tps_cell select1,$c) | $(tps_cell plain,$c) | $(tps_ratio plain,$c select1,$c)" \
            "| $(tps_cell quorum,$c) | $(tps_ratio quorum,$c select1,$c) | $(tps_cell spread,$c) |"
    done
    echo
    echo "'cluster' (a leased serving node): node 0 holds the lease; on node 1 every call is"
    echo "forwarded to it. Ratios against SELECT 1 on the same node."
    echo
    echo "| clients | SELECT 1 tps, holder | hilo_nextval on the holder | ratio | SELECT 1 tps, node 1 | hilo_nextval forwarded from node 1 | ratio |"
    echo "|---:|---:|---:|---:|---:|---:|---:|"
    for c in $CLIENT_COUNTS; do
        echo "| $c | $(tps_cell select1,$c) | $(tps_cell holder,$c) | $(tps_ratio holder,$c select1,$c)" \
            "| $(tps_cell select1b,$c) | $(tps_cell forwarded,$c) | $(tps_ratio forwarded,$c select1b,$c) |"
    done
    echo
    printf "The holder's server killed (kill -9 of every process) -> the first ID from its successor, called from node 1: %.2f s (hilo.lease_time = %s, hilo.clock_drift_bound = %s ppm; the successor waits until the holder's ballot stood still for a lease time, then a lease time plus the drift margin).\n" \
        "$FAILOVER" "$LEASE_TIME" "$DRIFT"
} >"$DOC.new"
mv "$DOC.new" "$DOC"
cat "$DOC"
