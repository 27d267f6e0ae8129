#!/usr/bin/env bash
# Three hilo nodes on this machine, each a throwaway PostgreSQL 15 with the
# agent worker running: forms a cluster, takes IDs on every node, then stops
# two nodes and shows what still works. Prints every statement and its
# output (docs/multi-node.md shows one run), then stops the servers.
#
#   scripts/cluster_demo.sh
source "$(dirname "$0")/lib.sh"

ensure_packages
build_and_install

NAMES=(a b c)
trap stop_nodes EXIT
HILO_NODE_PORT=54500
for n in "${NAMES[@]}"; do
    start_node "$n" "hilo.agent_database = 'postgres'" \
        "hilo.agent_interval = '1s'" \
        "hilo.claim_timeout = '2s'  # membership changes then settle in 4 s (default 10 s: 20 s)"
done
conninfo() { node_conninfo "$1"; }
on() { show_on "$@"; }

log "every node: CREATE EXTENSION hilo"
for n in "${NAMES[@]}"; do on "$n" -q -c 'CREATE EXTENSION hilo'; done

log "a cluster of three, built from node a"
on a -c "SELECT hilo_create('orders', window_size => 1000000)"
for n in "${NAMES[@]}"; do
    on a -c "SELECT hilo_add_node('$n', '$(conninfo "$n")')"
done
sleep 2
on a -c 'SELECT node_id, name, is_self, fenced, reachable, epoch FROM hilo.nodes'

log "the agents carried the sequence and opened windows; takes stay local"
for n in "${NAMES[@]}"; do
    on "$n" -c "SELECT hilo_take('orders', 5) AS five_ids" \
        -c "SELECT window_start_value, window_end_value, next_hi_value
              FROM hilo.windows ORDER BY 1"
done
on b -c 'SELECT ok, has_majority, nodes_reachable, message FROM hilo.agent_status'

log "a take larger than the open windows claims through the register"
on c -c "SELECT hilo_take('orders', 5000000) AS big"

log "c stops: two of three is still a majority"
pg_ctl_node c -m immediate stop
on a -c "SELECT hilo_take('orders', 5000000) AS big" \
    -c 'SELECT hilo_agent_run()'

log "b stops too: no majority; open windows still serve takes"
pg_ctl_node b -m immediate stop
on a -c "SELECT hilo_take('orders', 3) AS still_works" \
    -c "SELECT hilo_take('orders', 5000000) AS needs_a_majority" \
    -c 'SELECT hilo_agent_run()' \
    -c "SELECT name, reachable, last_error FROM hilo.nodes"

log "b and c come back"
for n in b c; do
    pg_ctl_node "$n" start
done
sleep 2
on a -c 'SELECT ok, has_majority, nodes_reachable, message FROM hilo.agent_status'
