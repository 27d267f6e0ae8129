#!/usr/bin/env bash
# Cluster-wide settings and orderings on three throwaway hilo nodes on this
# machine (docs/multi-node.md, "Settings are cluster-wide" and "Orderings",
# shows one run). The agent worker is off: every pass is a hilo_agent_run()
# of the script, so what each node has before and after a pass is exact.
# Prints every statement with its output, then stops the servers.
#
#   scripts/settings_demo.sh
source "$(dirname "$0")/lib.sh"

ensure_packages
make -C "$HILO_ROOT" -s -j"$(nproc)"
# A private copy of PostgreSQL with this build of hilo: nothing system-wide.
make_pg_dir PRIVATE settings-demo-pg
install_private "$PRIVATE/pg"

NAMES=(a b c)
trap stop_nodes EXIT
HILO_NODE_PORT=54600
for n in "${NAMES[@]}"; do
    start_node "$n" "hilo.claim_timeout = '2s'"
done
conninfo() { node_conninfo "$1"; }
on() { show_on "$@"; }
settings="SELECT name, ordering, monotonic, settings_version, window_size, min_open_windows,
       block_size FROM hilo.sequences ORDER BY name"
status="SELECT sequence, ordering, settings_version, settings_behind, nodes_behind
  FROM hilo.status ORDER BY sequence"

log "every node: CREATE EXTENSION hilo; on a: a monotonic sequence, then a cluster of three"
for n in "${NAMES[@]}"; do on "$n" -q -c 'CREATE EXTENSION hilo'; done
on a -c "SELECT hilo_create('mono', monotonic => true)" \
    -c "SELECT hilo_create('orders', window_size => 1000)"
for n in "${NAMES[@]}"; do
    on a -q -c "SELECT hilo_add_node('$n', '$(conninfo "$n")')" >/dev/null
done
on c -c "$settings" -c "SELECT hilo_push('mono', '{[1,1]}')"

log "orderings on a node of the cluster"
on b -c "SELECT hilo_create('m2', monotonic => true)" \
    -c "SELECT hilo_create('m3', ordering => 'cluster')"

log "hilo_alter on a; b has the old settings until an agent pass"
on a -c "SELECT hilo_alter('orders', NULL, 5000, 3, NULL)"
on b -c "$settings"
on a -c "SELECT hilo_agent_run()"
on b -c "$settings"

log "c stops; an alter on a reaches b only; a reports c behind"
pg_ctl_node c -m fast stop
on a -c "SELECT hilo_alter('orders', block_size => 20)" -c "SELECT hilo_agent_run()" \
    -c "$status"
on a -c "SELECT hilo_alter('orders', max_value => 1000000)"

log "c comes back with its old copy, and catches up at its next pass"
pg_ctl_node c start
on c -c "$status" -c "SELECT hilo_agent_run()" -c "$status"
on a -c "SELECT hilo_agent_run()" -c "$status"
