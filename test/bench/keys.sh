#!/usr/bin/env bash
# Keys for sharded tables, side by side on one server:
#   1. bulk inserts: ROWS rows into a table whose primary key defaults to
#      each generator, one INSERT ... SELECT per table: time, and primary
#      key bytes per row;
#   2. pgbench, CLIENTS clients (default 8), one-row inserts into such a
#      table for SECONDS: rows per second, and primary key bytes per row.
# Generators: hilo_uuid, gen_random_uuid(), a UUIDv7 generator in SQL
# (PostgreSQL 15 has no uuidv7()), hilo_nextval, hilo_nextval of a sequence
# with node_bits => 4, and bigserial. Every round runs every generator once,
# in turn (interleaved), ROUNDS rounds; the tables give the median and the
# spread (min..max) over the rounds. Writes docs/bench/keys.md.
#
#   test/bench/keys.sh                                   3 M rows, 3 rounds, 10 s pgbench
#   ROWS=500000 ROUNDS=3 SECONDS_PER_RUN=5 test/bench/keys.sh   a quick run
source "$(dirname "$0")/lib.sh"
setting ROUNDS 3
setting ROWS 3000000
setting SECONDS_PER_RUN 10
setting CLIENTS 8

ensure_packages
bench_server 54370 "shared_buffers = 512MB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" "jit = off" \
    "max_connections = 100"

q <<'SQL'
CREATE EXTENSION hilo;
SELECT hilo_create('k_uuid') \g /dev/null
SELECT hilo_create('k_id') \g /dev/null
SELECT hilo_create('k_nodes', node_bits => 4) \g /dev/null
-- UUIDv7 in SQL: 48-bit Unix ms over the first 6 bytes of a v4 UUID, and
-- the version nibble turned from 0100 into 0111.
CREATE FUNCTION uuidv7_sql() RETURNS uuid LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid()) PLACING
               substring(int8send(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint)
                         FROM 3) FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
SQL

# label|column definition
GENERATORS=("hilo_uuid|uuid PRIMARY KEY DEFAULT hilo_uuid('k_uuid')"
    "gen_random_uuid()|uuid PRIMARY KEY DEFAULT gen_random_uuid()"
    "UUIDv7 in SQL|uuid PRIMARY KEY DEFAULT uuidv7_sql()"
    "hilo_nextval|bigint PRIMARY KEY DEFAULT hilo_nextval('k_id')"
    "hilo_nextval, node_bits 4|bigint PRIMARY KEY DEFAULT hilo_nextval('k_nodes')"
    "bigserial|bigserial PRIMARY KEY")

# Checks that the SQL generator makes version 7 UUIDs that increase with time.
[ "$(q -c "SELECT substr(uuidv7_sql()::text, 15, 1) || substr(hilo_uuid('k_uuid')::text, 15, 1)")" = 77 ] ||
    { echo "uuidv7_sql() or hilo_uuid() is not version 7" >&2; exit 1; }

declare -A bulk_ms bulk_bytes pgb_tps pgb_bytes
log "bulk: $ROWS rows per table, $ROUNDS interleaved rounds"
for round in $(seq 1 "$ROUNDS"); do
    i=0
    for g in "${GENERATORS[@]}"; do
        i=$((i + 1))
        q -c "SET client_min_messages = warning; DROP TABLE IF EXISTS b$i; CREATE TABLE b$i (id ${g#*|}, payload int)"
        q -c "CHECKPOINT"
        ms=$(time_ms -c "INSERT INTO b$i (payload) SELECT g FROM generate_series(1, $ROWS) g")
        bytes=$(q -c "SELECT round(pg_relation_size('b${i}_pkey')::numeric / $ROWS, 1)")
        bulk_ms[$i]+=" $ms"
        bulk_bytes[$i]=$bytes
        q -c "DROP TABLE b$i"
        echo "round $round ${g%%|*}: $ms ms, $bytes B/row"
    done
done

log "pgbench: $CLIENTS clients, one-row inserts, ${SECONDS_PER_RUN}s per run, $ROUNDS interleaved rounds"
BDIR=$(mktemp -d)
chmod 755 "$BDIR"
for round in $(seq 1 "$ROUNDS"); do
    i=0
    for g in "${GENERATORS[@]}"; do
        i=$((i + 1))
        q -c "SET client_min_messages = warning; DROP TABLE IF EXISTS p$i; CREATE TABLE p$i (id ${g#*|}, payload int)"
        echo "INSERT INTO p$i (payload) VALUES (1);" >"$BDIR/p$i.sql"
        chmod 644 "$BDIR/p$i.sql"
        q -c "CHECKPOINT"
        tps=$(as_pg "$PG_BIN/pgbench" -h "$DIR" -p "$PORT" -n -M prepared -c "$CLIENTS" -j 2 \
            -T "$SECONDS_PER_RUN" -f "$BDIR/p$i.sql" postgres 2>/dev/null |
            sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        bytes=$(q -c "SELECT round(pg_relation_size('p${i}_pkey')::numeric / count(*), 1) FROM p$i")
        pgb_tps[$i]+=" $tps"
        pgb_bytes[$i]+=" $bytes"
        q -c "DROP TABLE p$i"
        echo "round $round ${g%%|*}: $tps rows/s, $bytes B/row"
    done
done
rm -rf "$BDIR"

BULK_TABLE="| key | median ms | spread ms | ratio to hilo_uuid | pkey bytes per row |
|---|---:|---:|---:|---:|"
PGB_TABLE="| key | median rows/s | spread rows/s | ratio to hilo_uuid | pkey bytes per row (median) |
|---|---:|---:|---:|---:|"
ref_ms=$(echo "${bulk_ms[1]}" | median)
ref_tps=$(echo "${pgb_tps[1]}" | median)
i=0
for g in "${GENERATORS[@]}"; do
    i=$((i + 1))
    m=$(echo "${bulk_ms[$i]}" | median)
    t=$(echo "${pgb_tps[$i]}" | median)
    BULK_TABLE+="
| ${g%%|*} | $(printf %.0f "$m") | $(echo "${bulk_ms[$i]}" | minmax) | $(awk "BEGIN{printf \"%.2f\", $m / $ref_ms}") | ${bulk_bytes[$i]} |"
    PGB_TABLE+="
| ${g%%|*} | $(printf %.0f "$t") | $(echo "${pgb_tps[$i]}" | minmax) | $(awk "BEGIN{printf \"%.2f\", $t / $ref_tps}") | $(echo "${pgb_bytes[$i]}" | median) |"
done
echo "$BULK_TABLE"
echo "$PGB_TABLE"

mkdir -p "$(dirname "$DOC")"
cat >"$DOC" <<DOC
# Keys for sharded tables: hilo_uuid and hilo_nextval against the usual keys

Written by \`test/bench/keys.sh\` (ROWS=$ROWS ROUNDS=$ROUNDS SECONDS_PER_RUN=$SECONDS_PER_RUN
CLIENTS=$CLIENTS) on $(date -u +%Y-%m-%d), commit $(git -C "$HILO_ROOT" rev-parse --short HEAD),
PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}'), $(nproc) cores
(shared with other work while it ran: read the spreads).

Every round runs every generator once, in turn; each figure is the median
over $ROUNDS rounds, with the spread (min..max) beside it. "UUIDv7 in SQL"
is the usual SQL function (48-bit Unix ms over a v4 UUID, version nibble
set to 7; PostgreSQL 15 has no \`uuidv7()\`). "pkey bytes per row" is the
size of the primary key index over the rows in the table.

## $ROWS rows, one INSERT ... SELECT per table

$BULK_TABLE

## pgbench -M prepared, $CLIENTS clients, one-row INSERTs, ${SECONDS_PER_RUN} s per run

$PGB_TABLE

Ratios above 1 are slower for bulk inserts (time) and faster for pgbench
(rows per second).
DOC
log "wrote $DOC"
