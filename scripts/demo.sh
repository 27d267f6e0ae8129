#!/usr/bin/env bash
# The hilo demo: installs what it needs, builds and installs hilo, starts a
# throwaway PostgreSQL with hilo preloaded, shows takes and pushes, stops it.
source "$(dirname "$0")/lib.sh"

ensure_packages
build_and_install

make_pg_dir DIR demo
PORT=$(free_port 54329)
trap 'stop_cluster "$DIR"; cleanup_dirs' EXIT
log "starting a throwaway PostgreSQL $PG_MAJOR on port $PORT (socket in $DIR)"
start_cluster "$DIR" "$PORT"

log "running the demo"
as_pg "$PG_BIN/psql" -h "$DIR" -p "$PORT" -d postgres -X -q -v ON_ERROR_STOP=1 -e \
    -f "$HILO_ROOT/scripts/demo.sql"
log "demo done; stopping the server"
