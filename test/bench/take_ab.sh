#!/usr/bin/env bash
# A/B: small takes (n = 1 and 10, from the pool) and hilo_nextval, 0.4.0 build vs main build, interleaved.
# Usage: test/bench/take_ab.sh OLD_TREE NEW_TREE (each a built checkout). Not a test.
source "$(dirname "$0")/../../scripts/lib.sh"
OLD=$1 NEW=$2
set +e
declare -A DIRS PORTS
for v in old new; do
  make_pg_dir D ab-$v
  T=$([ $v = old ] && echo "$OLD" || echo "$NEW"); HILO_ROOT=$T install_private "$D/pg" "$T"
  chown -R postgres: "$D"
  P=$(free_port $([ $v = old ] && echo 55410 || echo 55420))
  start_cluster "$D" "$P"
  DIRS[$v]=$D; PORTS[$v]=$P
  as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p $P -d postgres -qc "CREATE EXTENSION hilo; SELECT hilo_create('s')" >/dev/null
done
trap 'for v in old new; do as_pg ${DIRS[$v]}/pg/usr/lib/postgresql/15/bin/pg_ctl -D ${DIRS[$v]}/data -m fast stop >/dev/null; done; cleanup_dirs' EXIT
for q in "SELECT hilo_take('s', 1)" "SELECT hilo_take('s', 10)" "SELECT hilo_nextval('s')"; do
  echo "$q" > /tmp/ab.sql; chmod 644 /tmp/ab.sql
  for r in 1 2 3; do
    for v in old new; do
      D=${DIRS[$v]}
      tps=$(as_pg $D/pg/usr/lib/postgresql/15/bin/pgbench -n -M prepared -T 8 -c 2 -j 2 -h $D -p ${PORTS[$v]} -f /tmp/ab.sql postgres 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
      echo "$q | round $r | $v | $tps"
    done
  done
done
