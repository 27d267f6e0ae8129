#!/usr/bin/env bash
# What 'cluster' sequences that nobody calls cost, on three local nodes (one
# machine, fsync on, hilo.lease_time 2 s, the agent every 10 s). Each
# round, for each COUNT of idle sequences (0, 10, 1000): the sequences of
# the last count are dropped and COUNT new 'cluster' sequences created,
# each called once on node 0 (which takes their leases) and once on node 1
# (forwarded to node 0); after SETTLE_SECONDS, nothing is called for
# IDLE_SECONDS, over which the script measures
#  - WAL: pg_current_wal_lsn() deltas, added up over the three nodes;
#  - CPU: utime + stime from /proc/<pid>/stat of hilo's processes on the
#    three nodes (its background workers, and the backends serving hilo's
#    connections, which pg_stat_activity names 'hilo ...'), added up, by
#    kind: the lease worker and the backends serving lease workers, the
#    agent and the backends serving agents, the rest (claim servers);
# then pgbench -M prepared calls hilo_nextval('hot') of one more 'cluster'
# sequence (node 0 holds its lease) for SECONDS_PER_RUN with CLIENTS
# clients on node 0 and then on node 1 (forwarded), while the COUNT others
# exist. The counts take turns within each round; medians over the rounds,
# spreads (min..max) beside them. Writes docs/bench/idle_cluster.md.
#
#   test/bench/idle_cluster.sh                 3 rounds, 30 s idle each
#   QUICK=1 test/bench/idle_cluster.sh         1 round, counts 0 10 100
source "$(dirname "$0")/lib.sh"
setting ROUNDS 3 1
setting COUNTS "0 10 1000" "0 10 100"
setting IDLE_SECONDS 30 5
setting SETTLE_SECONDS 10 6
setting SECONDS_PER_RUN 5 2
setting CLIENTS 4
setting CALLERS 50 # sessions that call the new sequences at once
NODES=3

ensure_packages
# A private copy of PostgreSQL with this build (scripts/lib.sh): nothing
# system-wide changes under other sessions' servers.
make -C "$HILO_ROOT" -s -j"$(nproc)"
make_pg_dir PRIVATE pg
install_private "$PRIVATE/pg"
chown -R "$PG_USER": "$PRIVATE"

HILO_NODE_PORT=54600
start_nodes "$NODES" "max_connections = 250" "hilo.claim_timeout = '10s'" \
    "hilo.agent_database = 'postgres'" "hilo.agent_interval = '10s'" "hilo.lease_time = '2s'"
for k in $(seq 0 $((NODES - 1))); do
    on 0 -c "SELECT hilo_add_node('node$k', '$(conninfo "$k")')" >/dev/null
done
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)

# until_all SQL: waits (60 s at most) until SQL returns t on every node.
until_all() {
    local k
    for k in $(seq 0 $((NODES - 1))); do
        for _ in $(seq 1 120); do
            [ "$(on "$k" -c "$1")" = t ] && break
            sleep 0.5
        done
    done
}

on 0 -c "SELECT hilo_create('hot', ordering => 'cluster')" >/dev/null
until_all "SELECT count(*) = 1 FROM hilo.sequences WHERE name = 'hot'"
# Node 0 calls first, so it takes the lease; node 1 forwards to it.
for _ in $(seq 1 30); do
    on 0 -c "SELECT hilo_nextval('hot')" >/dev/null 2>&1 && break
    sleep 1
done
on 1 -c "SELECT hilo_nextval('hot')" >/dev/null

# call_all K N: calls idle_1 .. idle_N once each on node K, CALLERS
# sessions at once (a new lease waits a lease time before it serves).
call_all() {
    local k=$1 n=$2 j pids=()
    for j in $(seq 1 "$CALLERS"); do
        [ "$j" -le "$n" ] || break
        on "$k" -c "SELECT count(hilo_nextval('idle_' || i)) FROM generate_series($j, $n, $CALLERS) AS i" \
            >/dev/null &
        pids+=($!)
    done
    [ ${#pids[@]} -eq 0 ] || wait "${pids[@]}"
}

# set_count N: N idle 'cluster' sequences instead of the last count's.
set_count() {
    local n=$1
    on 0 -c "SELECT count(hilo_drop(name)) FROM hilo.sequences WHERE name LIKE 'idle\_%'" >/dev/null
    on 0 -c "SELECT hilo_agent_run()" >/dev/null # carries the drops now
    until_all "SELECT count(*) = 0 FROM hilo.sequences WHERE name LIKE 'idle\_%'"
    [ "$n" -gt 0 ] || return 0
    on 0 -c "SELECT count(hilo_create('idle_' || i, ordering => 'cluster'))
               FROM generate_series(1, $n) AS i" >/dev/null
    on 0 -c "SELECT hilo_agent_run()" >/dev/null
    until_all "SELECT count(*) = $n FROM hilo.sequences WHERE name LIKE 'idle\_%'"
    call_all 0 "$n"
    call_all 1 "$n"
}

CLK_TCK=$(getconf CLK_TCK)
# The CPU ticks (user + system) a process has used, 0 if it is gone.
ticks() {
    if [ -r "/proc/$1/stat" ]; then
        sed 's/^.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'
    else
        echo 0
    fi
}
# hilo's processes on node K: "pid kind" lines.
hilo_pids() {
    on "$1" -F ' ' -c "SELECT pid, CASE
          WHEN backend_type LIKE 'hilo lease%' OR application_name = 'hilo lease worker' THEN 'lease'
          WHEN backend_type LIKE 'hilo agent%' OR application_name = 'hilo agent' THEN 'agent'
          ELSE 'other' END
        FROM pg_stat_activity
       WHERE backend_type LIKE 'hilo%' OR application_name LIKE 'hilo%'"
}

declare -A res
# measure_idle N: one idle period; appends to res[wal,N], res[lease,N] ...
measure_idle() {
    local n=$1 k pid kind wal=0 lsn
    local -A start_ticks=() kind_of=() used=([lease]=0 [agent]=0 [other]=0) lsn0=()
    for k in $(seq 0 $((NODES - 1))); do
        while read -r pid kind; do
            [ -n "$pid" ] || continue
            kind_of[$pid]=$kind
            start_ticks[$pid]=$(ticks "$pid")
        done < <(hilo_pids "$k")
        lsn0[$k]=$(on "$k" -c "SELECT pg_current_wal_lsn()")
    done
    sleep "$IDLE_SECONDS"
    for k in $(seq 0 $((NODES - 1))); do
        lsn=$(on "$k" -c "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '${lsn0[$k]}')")
        wal=$(echo "$wal + $lsn" | bc -l)
    done
    for pid in "${!kind_of[@]}"; do
        local now_ticks
        now_ticks=$(ticks "$pid")
        [ "$now_ticks" -ge "${start_ticks[$pid]}" ] || continue # gone
        kind=${kind_of[$pid]}
        used[$kind]=$((used[$kind] + now_ticks - start_ticks[$pid]))
    done
    if [ -n "${WALDUMP:-}" ]; then # what the WAL of the idle period holds, on node 0
        as_pg "$PG_BIN/pg_waldump" -p "${NODE_DIR[0]}/data/pg_wal" -s "${lsn0[0]}" \
            -e "$(on 0 -c 'SELECT pg_current_wal_lsn()')" --stats=record 2>&1 | head -30 >&2
        as_pg "$PG_BIN/pg_waldump" -p "${NODE_DIR[0]}/data/pg_wal" -s "${lsn0[0]}" \
            -e "$(on 0 -c 'SELECT pg_current_wal_lsn()')" 2>/dev/null |
            grep -o 'rel [0-9/]*' | sort | uniq -c | sort -rn | head -8 >&2
        on 0 -c "SELECT relfilenode, relname FROM pg_class c JOIN pg_namespace n ON n.oid = relnamespace
                  WHERE nspname IN ('hilo', 'pg_catalog') AND relfilenode > 0" >"$WORK/relnames"
        cp "$WORK/relnames" /tmp/idle_cluster_relnames 2>/dev/null || true
    fi
    res[wal,$n]+="$(echo "$wal / $IDLE_SECONDS" | bc -l) "
    for kind in lease agent other; do
        res[$kind,$n]+="$(echo "${used[$kind]} / $CLK_TCK / $IDLE_SECONDS" | bc -l) "
    done
    res[cpu,$n]+="$(echo "(${used[lease]} + ${used[agent]} + ${used[other]}) / $CLK_TCK / $IDLE_SECONDS" | bc -l) "
}

WORK=$(mktemp -d)
chmod 755 "$WORK"
trap 'stop_nodes; rm -rf "$WORK"' EXIT
echo "SELECT hilo_nextval('hot');" >"$WORK/hot.sql"
# pgbench on node k: prints tps (and the first error, if any).
bench() {
    local k=$1 out
    on "$k" -c "SELECT hilo_nextval('hot')" >/dev/null # its lease lapsed while idle
    out=$(as_pg "$PG_BIN/pgbench" -n -M prepared -c "$CLIENTS" -j 2 -T "$SECONDS_PER_RUN" \
        -f "$WORK/hot.sql" -h "${NODE_DIR[$k]}" -p "${NODE_PORT[$k]}" postgres 2>&1)
    grep -m1 "ERROR\|aborted" <<<"$out" >&2 || true
    sed -n 's/^tps = \([0-9.]*\) (without.*/\1/p' <<<"$out"
}

for round in $(seq 1 "$ROUNDS"); do
    for n in $COUNTS; do
        log "round $round: $n idle 'cluster' sequences"
        set_count "$n"
        sleep "$SETTLE_SECONDS" # their leases lapse (a lease time unused, then the lease's end)
        measure_idle "$n"
        res[holder,$n]+="$(bench 0) "
        res[forwarded,$n]+="$(bench 1) "
    done
done
LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)

BASE=${COUNTS%% *}
# cell KEY FORMAT: the median of res[KEY] in FORMAT, the spread beside it.
cell() {
    local lo hi
    read -r lo hi < <(tr ' ' '\n' <<<"${res[$1]}" | grep . | sort -g | sed -n '1p;$p' | tr '\n' ' ')
    printf "$2 ($2..$2)" "$(median <<<"${res[$1]}")" "$lo" "$hi"
}
# ratio KEY: the median of res[KEY] over that of the same key at count BASE.
ratio() {
    local a b
    a=$(median <<<"${res[$1,$2]}")
    b=$(median <<<"${res[$1,$BASE]}")
    if [ "$(echo "$b > 0" | bc -l)" = 1 ]; then printf '%.2f' "$(echo "$a / $b" | bc -l)"; else echo -; fi
}

{
    echo "# What idle 'cluster' sequences cost"
    echo
    echo "Written by \`test/bench/idle_cluster.sh\` (ROUNDS=$ROUNDS IDLE_SECONDS=$IDLE_SECONDS"
    echo "SETTLE_SECONDS=$SETTLE_SECONDS SECONDS_PER_RUN=$SECONDS_PER_RUN CLIENTS=$CLIENTS) on"
    echo "$(date -u +%Y-%m-%d), commit $(git -C "$HILO_ROOT" rev-parse --short HEAD), PostgreSQL"
    echo "$("$PG_BIN/postgres" --version | awk '{print $3}'), $(nproc) cores, load average $LOAD_START at"
    echo "the start and $LOAD_END at the end. Three nodes on this one machine, fsync on,"
    echo "hilo.lease_time 2 s, hilo.agent_interval 10 s (the default). Each round takes every count in"
    echo "turn: the idle sequences made anew and called once on node 0 (the lease"
    echo "holder) and once on node 1, $SETTLE_SECONDS s to settle, $IDLE_SECONDS s with no call"
    echo "measured, then the calls of one more 'cluster' sequence. Medians over the"
    echo "rounds, spreads (min..max) beside them."
    echo
    echo "Idle: WAL and CPU of hilo's processes, added up over the three nodes."
    echo
    echo "| idle 'cluster' sequences | WAL, bytes/s | ratio | hilo CPU, s/s | ratio | lease worker and its acceptors | agent | other |"
    echo "|---:|---:|---:|---:|---:|---:|---:|---:|"
    for n in $COUNTS; do
        echo "| $n | $(cell wal,$n %.0f) | $(ratio wal "$n") | $(cell cpu,$n %.3f) | $(ratio cpu "$n")" \
            "| $(cell lease,$n %.3f) | $(cell agent,$n %.3f) | $(cell other,$n %.3f) |"
    done
    echo
    echo "Calls: pgbench -M prepared, $CLIENTS clients, SELECT hilo_nextval('hot'), on the holder"
    echo "and forwarded from node 1, while the idle sequences exist."
    echo
    echo "| idle 'cluster' sequences | on the holder, tps | ratio | forwarded, tps | ratio |"
    echo "|---:|---:|---:|---:|---:|"
    for n in $COUNTS; do
        echo "| $n | $(cell holder,$n %.0f) | $(ratio holder "$n") | $(cell forwarded,$n %.0f) | $(ratio forwarded "$n") |"
    done
} >"$DOC.new"
mv "$DOC.new" "$DOC"
cat "$DOC"
