#!/usr/bin/env bash
# The multi-node side of hilo on five local nodes (one machine, fsync on):
#
#  1. how long the agent takes to bring 5 nodes from nothing to
#     min_open_windows (2) open windows for 100 new sequences (agent passes
#     run back to back with hilo_agent_run() on one node; the sequences are
#     created on that node and carried to the others by the agent);
#  2. window claims per second through the quorum register with 1, 2 and 4
#     concurrent claimers: claimer k is the allocator of node k, driven by
#     one pgbench session whose every take needs a new window (no agent runs,
#     so each take claims its own window through the register: a majority
#     read and a majority set, each set committed durably on every node that
#     accepts). Once with all claimers on one sequence (they contend for the
#     same register key), once with one sequence per claimer.
#
# Prints a table and writes it to docs/bench/agent.md.
#
#   test/bench/agent.sh [seconds per claim run]     (default 10)
source "$(dirname "$0")/lib.sh"
SECONDS_PER_RUN=${1:-10}
NODES=5

ensure_packages
build_and_install

HILO_NODE_PORT=54400
now() { date +%s.%N; }
# A node with hilo preloaded, no agent worker, and a short claim timeout (so
# that forming the cluster does not wait long between membership changes).
start_nodes "$NODES" "max_connections = 50" "hilo.claim_timeout = '500ms'"
log "forming the cluster"
for k in $(seq 0 $((NODES - 1))); do
    on 0 -c "SELECT hilo_add_node('node$k', '$(conninfo "$k")')" >/dev/null 2>&1
done
on 0 -c 'SELECT count(*) FROM hilo.nodes'

# ---- 1. Agent: 5 nodes from zero to min_open_windows for 100 sequences.
log "agent: 100 new sequences to min_open_windows on $NODES nodes"
on 0 -c "SELECT count(hilo_create('seq' || i, window_size => 1000, min_open_windows => 2))
           FROM generate_series(1, 100) i" >/dev/null
supplied() { supplied_count 'seq%' $(seq 0 $((NODES - 1))); }
t0=$(now)
passes=0
while [ "$(supplied)" -lt $((NODES * 100)) ]; do
    on 0 -c 'SELECT hilo_agent_run()' >/dev/null
    passes=$((passes + 1))
    [ $passes -lt 20 ] || { echo "not supplied after 20 passes" >&2; exit 1; }
done
t1=$(now)
AGENT_SECONDS=$(echo "$t1 - $t0" | bc -l)
WINDOWS=$(for k in $(seq 0 $((NODES - 1))); do on "$k" -c "SELECT count(*) FROM hilo.windows"; done |
    paste -sd+ | bc)
AGENT_LINE=$(printf "%d sequences x %d nodes: %.2f s in %d agent pass(es), %d windows installed" \
    100 "$NODES" "$AGENT_SECONDS" "$passes" "$WINDOWS")
echo "$AGENT_LINE"

# ---- 2. Claims per second through the register.
TAKE_DIR=$(mktemp -d)
chmod 755 "$TAKE_DIR"
run_claimers() {
    local claimers=$1 shared=$2 pids=() total=0 lat=0
    for k in $(seq 0 $((claimers - 1))); do
        local seq=$([ "$shared" = yes ] && echo shared || echo "own$k")
        on 0 -c "SELECT hilo_create('$seq', window_size => 1000, min_open_windows => 1)
                  WHERE NOT EXISTS (SELECT 1 FROM hilo.sequences WHERE name = '$seq')" >/dev/null
        # Every take wants more than a window holds: one register claim each.
        echo "SELECT hilo_take('$seq', 1001);" >"$TAKE_DIR/$seq.sql"
    done
    on 0 -c 'SELECT hilo_agent_run()' >/dev/null # carries the sequences
    for k in $(seq 0 $((claimers - 1))); do
        local seq=$([ "$shared" = yes ] && echo shared || echo "own$k")
        as_pg "$PG_BIN/pgbench" -n -c 1 -T "$SECONDS_PER_RUN" -f "$TAKE_DIR/$seq.sql" \
            -h "${NODE_DIR[$k]}" -p "${NODE_PORT[$k]}" postgres >"$TAKE_DIR/out$k" 2>&1 &
        pids+=($!)
    done
    wait "${pids[@]}"
    for k in $(seq 0 $((claimers - 1))); do
        local tps l
        tps=$(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$TAKE_DIR/out$k")
        l=$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' "$TAKE_DIR/out$k")
        grep -q "aborted\|error" "$TAKE_DIR/out$k" && { cat "$TAKE_DIR/out$k" >&2; }
        total=$(echo "$total + ${tps:-0}" | bc -l)
        lat=$(echo "$lat + ${l:-0}" | bc -l)
    done
    printf "| %d | %s | %.0f | %.1f |\n" "$claimers" \
        "$([ "$shared" = yes ] && echo "one, shared" || echo "one each")" "$total" \
        "$(echo "$lat / $claimers" | bc -l)"
}
log "claims through the register, ${SECONDS_PER_RUN}s per run"
TABLE="| claimers | sequences | claims/s (all claimers) | mean claim+take latency (ms) |
|---|---|---|---|"
for shared in yes no; do
    for c in 1 2 4; do
        row=$(run_claimers "$c" "$shared")
        echo "$row"
        TABLE="$TABLE
$row"
    done
done
rm -rf "$TAKE_DIR"

REPORT="Agent, from zero: $AGENT_LINE.

Window claims through the quorum register ($NODES nodes, majority 3):

$TABLE"
echo
echo "$REPORT"
mkdir -p "$HILO_ROOT/docs/bench"
{
    echo "# Multi-node: the agent and the quorum register"
    echo
    echo "Produced by \`test/bench/agent.sh $SECONDS_PER_RUN\` on $(date -u +%Y-%m-%d), PostgreSQL"
    echo "$($PG_BIN/postgres --version | sed 's/.*) //'), $(nproc) cores, $NODES nodes on this one machine"
    echo "(Unix sockets, fsync on, one disk for all). A claim is a majority read and a majority"
    echo "set; every node that accepts the set commits it with synchronous_commit = on before"
    echo "it answers. Each claimer is one node's allocator, driven by one pgbench session whose"
    echo "every take needs its own window."
    echo
    echo "$REPORT"
} >"$HILO_ROOT/docs/bench/agent.md"
echo "written to docs/bench/agent.md"
