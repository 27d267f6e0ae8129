#!/usr/bin/env bash
# A/B of two builds of hilo, side by side (two servers), interleaved rounds.
# Usage: test/bench/take_ab.sh OLD_TREE NEW_TREE (each a built checkout). Not a test.
#   default:    small takes (n = 1 and 10, from the pool) and hilo_nextval,
#               pgbench -M prepared, 2 clients (0.4.0 against main)
#   ALLOCATOR=1 the allocator's targets on both builds:
#               hilo_take(s, 10^6) and a synchronous one-row INSERT at 1, 4
#               and 16 clients; hilo_take(s, 10) and SELECT 1 at 8 clients
#   FRAGMENTED=1 takes from a fragmented free list: per round and build, a
#               new sequence with FRAG (100,000) single-ID free ranges, all
#               taken back by FRAG/1000 hilo_take(s, 1000), each through
#               the allocator (reading and deleting 1,000 free rows): IDs
#               per second; the build that goes first alternates by round
#   FRAGPUSH=1  a fragmented push and what follows it, as family 1 of
#               test/bench/scale.sh measures them: per round and build, a
#               sequence whose FRAG (100,000) single-ID ranges (every other
#               of 2 x FRAG IDs taken) are pushed in one hilo_push, and one
#               whose first FRAG IDs of 2 x FRAG taken are pushed as one
#               range; each timed in a fresh session (psql's \timing): the
#               push, then hilo_take(s, 1000), then FRAG hilo_nextval; the
#               build that goes first alternates by round. With
#               AB_CONF="max_connections = 1000" both servers run with it
#   PUSH=1      pushes: hilo_push(s, hilo_take(s, 10)) beside hilo_take(s, 10)
#               alone, 2 clients (a push looks its sequence up again once it
#               holds the sequence's lock, since 20a5bd2)
#   LEASE=1     the lease register's acceptor of ordering 'cluster' (each
#               server a cluster of one node): hilo._lease_handle() GRANTs
#               that raise a cell's bound (a durable write each; since
#               3eabe4d each also raises the node's write count, locking its
#               stamp row after the cell), one cell per client, at 1 and 3
#               clients (3: as three proposers); READs at 3 clients
#   MERGE=1     one role's pushes beside another's takes (docs/bench/merge.md): each
#               build gets a sequence with MERGE_FRAG (200,000) single-ID
#               free ranges; per round, one client pushes back 2 IDs to
#               each of MERGE_SEQS (65) sequences per transaction (more than
#               the allocator keeps merge spans of: both builds then merge
#               every sequence's rows; 17 is more only for the code before
#               the bounded merge passes) while 2 clients take 100 IDs of
#               another sequence through the allocator: the takers' tps, average, p99 and
#               maximum latency, and the pushers' tps; the build that goes
#               first alternates by round
#   CPU=1       the allocator's CPU time per hilo_take(s, 10^6), which a
#               loaded machine disturbs far less than tps: its utime + stime
#               (/proc/<pid>/stat, clock ticks) around CPU_TAKES (1,500)
#               takes from 1 client and 4 x CPU_TAKES from 16 (pgbench -t);
#               microseconds per take; the build that goes first alternates
#               by round
#   MANY=1      many sequences (test/bench/scale.sh, family 2): MANY_SEQS
#               (10,000) sequences on each server, each used once by 8
#               sessions before the rounds; per round and build, 8 clients
#               calling hilo_nextval('m' || k) with k = 1, k random and k
#               from a per-client counter (round-robin); the build that
#               goes first alternates by round. The servers keep idle pools
#               for 10 minutes (AB_CONF adds to that), so that neither
#               loses its pools while the other runs
# ROUNDS (3) and AB_SECONDS (8, or 5 with ALLOCATOR=1) set the size; AB_CONF
# (say "jit = off") is a line for both servers' postgresql.conf. Prints one
# line per run: statement | clients | round | build | tps; in every mode the build
# that goes first alternates by round.
source "$(dirname "$0")/../../scripts/lib.sh"
OLD=$1 NEW=$2
ROUNDS=${ROUNDS:-3}
SECONDS_PER_RUN=${AB_SECONDS:-$([ -n "${ALLOCATOR:-}" ] && echo 5 || echo 8)}
set +e
declare -A DIRS PORTS
for v in old new; do
    make_pg_dir D ab-$v
    T=$([ $v = old ] && echo "$OLD" || echo "$NEW")
    HILO_ROOT=$T install_private "$D/pg" "$T"
    chown -R postgres: "$D"
    P=$(free_port $([ $v = old ] && echo 55410 || echo 55420))
    start_cluster "$D" "$P" ${MANY:+"hilo.pool_idle_timeout = 600000"} ${AB_CONF:+"$AB_CONF"}
    DIRS[$v]=$D
    PORTS[$v]=$P
    as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p $P -d postgres -qc \
        "CREATE EXTENSION hilo; SELECT hilo_create('s'); SELECT hilo_create('big'); CREATE TABLE sync_t (v int)" >/dev/null
    if [ -n "${LEASE:-}" ]; then
        # A cluster of this one node, and a granted cell per client.
        as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p $P -d postgres -qAt \
            -c "SELECT hilo_add_node('self', 'host=$D port=$P dbname=postgres')" \
            -c "CREATE SEQUENCE bounds" >/dev/null
        for c in 0 1 2; do
            as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p $P -d postgres -qAt -c \
                "SELECT ok FROM hilo._lease_handle((SELECT epoch FROM hilo.cluster),
                   (SELECT (config->>'cluster_id')::bigint FROM hilo.cluster), 7, '{acc$c}', '{2}',
                   '{1}', '{0}', '{65543}', '{7}', '{1}')" | grep -qx t ||
                { echo "the first grant of acc$c was refused" >&2; exit 1; }
        done
    fi
done
trap 'for v in old new; do as_pg ${DIRS[$v]}/pg/usr/lib/postgresql/15/bin/pg_ctl -D ${DIRS[$v]}/data -m fast stop >/dev/null; done; cleanup_dirs' EXIT
SCRIPT=$(mktemp /tmp/hilo-ab.XXXXXX.sql)
chmod 644 "$SCRIPT"
COLD_CALLS=${COLD_CALLS:-200}
if [ -n "${COLD:-}" ]; then
    for v in old new; do
        as_pg ${DIRS[$v]}/pg/usr/lib/postgresql/15/bin/psql -h ${DIRS[$v]} -p ${PORTS[$v]} -d postgres -qc \
            "SELECT count(hilo_create('cold_' || i)) FROM generate_series(1, $((ROUNDS * COLD_CALLS))) i;
             SELECT hilo_nextval('s')" >/dev/null
    done
fi
MANY_SEQS=${MANY_SEQS:-10000}
if [ -n "${MANY:-}" ]; then
    for v in old new; do
        D=${DIRS[$v]}
        psql="as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p ${PORTS[$v]} -d postgres -qAtX"
        $psql -c "SELECT count(hilo_create('m' || g)) FROM generate_series(1, $MANY_SEQS) g" >/dev/null
        for c in $(seq 0 7); do
            $psql -c "SELECT count(hilo_nextval('m' || g)) FROM generate_series(1, $MANY_SEQS) g
                       WHERE g % 8 = $c" >/dev/null &
        done
        wait
    done
fi
# many ROUND
many() {
    local order="old new" w
    [ $(($1 % 2)) = 0 ] && order="new old"
    for w in one rnd ctr; do
        case $w in
        one) echo "SELECT hilo_nextval('m' || 1);" >"$SCRIPT" ;;
        rnd) printf '%s\n' "\\set k random(1, $MANY_SEQS)" "SELECT hilo_nextval('m' || :k);" >"$SCRIPT" ;;
        ctr) printf '%s\n' '\set i :i + 1' \
            "SELECT hilo_nextval('m' || ((:i * 8 + :client_id) % $MANY_SEQS + 1));" >"$SCRIPT" ;;
        esac
        for v in $order; do
            D=${DIRS[$v]}
            tps=$(as_pg $D/pg/usr/lib/postgresql/15/bin/pgbench -n -M prepared -T "$SECONDS_PER_RUN" -c 8 -j 2 \
                -D i=0 -h $D -p ${PORTS[$v]} -f "$SCRIPT" postgres 2>/dev/null |
                sed -n 's/^tps = \([0-9.]*\).*/\1/p')
            echo "hilo_nextval over $MANY_SEQS sequences, $w | 8 | round $1 | $v | $tps"
        done
    done
}
# cold ROUND: fresh sessions, one call each
cold() {
    local offset=$((($1 - 1) * COLD_CALLS))
    for q in "SELECT 1" "SELECT hilo_nextval('s')" "SELECT hilo_nextval('cold_' || :k)"; do
        printf '\\set k :k + 1\n%s\n' "$q" >"$SCRIPT"
        for v in old new; do
            D=${DIRS[$v]}
            tps=$(as_pg $D/pg/usr/lib/postgresql/15/bin/pgbench -n -C -t "$COLD_CALLS" -c 1 -D k=$offset \
                -h $D -p ${PORTS[$v]} -f "$SCRIPT" postgres 2>/dev/null |
                sed -n 's/^tps = \([0-9.]*\).*/\1/p')
            echo "$q, new connection each | 1 | round $1 | $v | $tps"
        done
    done
}
# run STATEMENT CLIENTS ROUND
run() {
    echo "$1" >"$SCRIPT"
    local order="old new"
    [ $(($3 % 2)) = 0 ] && order="new old"
    for v in $order; do
        D=${DIRS[$v]}
        tps=$(as_pg $D/pg/usr/lib/postgresql/15/bin/pgbench -n -M prepared -T "$SECONDS_PER_RUN" -c "$2" \
            -j "$(($2 < 2 ? 1 : 2))" -h $D -p ${PORTS[$v]} -f "$SCRIPT" postgres 2>/dev/null |
            sed -n 's/^tps = \([0-9.]*\).*/\1/p')
        echo "$1 | $2 | round $3 | $v | $tps"
    done
}
FRAG=${FRAG:-100000}
# frag ROUND
frag() {
    local order="old new"
    [ $(($1 % 2)) = 0 ] && order="new old"
    for v in $order; do
        D=${DIRS[$v]}
        local psql="as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p ${PORTS[$v]} -d postgres -qAtX"
        $psql -c "SELECT hilo_create('frag_$1', block_size => 10)" \
            -c "SELECT hilo_push('frag_$1', (SELECT range_agg(int8range(x, x, '[]'))
                  FROM unnest(hilo_take('frag_$1', $((2 * FRAG)))) r,
                       generate_series(lower(r), upper(r) - 1, 2) x))" >/dev/null
        local start end left
        start=$(date +%s%N)
        $psql -c "SELECT count(hilo_take('frag_$1', 1000)) FROM generate_series(1, $((FRAG / 1000)))" >/dev/null
        end=$(date +%s%N)
        left=$($psql -c "SELECT count(*) FROM hilo.free_ranges f JOIN hilo.sequences s USING (seq_id)
                          WHERE s.name = 'frag_$1'")
        [ "$left" = 0 ] || echo "warning: $left free rows of frag_$1 left on $v" >&2
        echo "hilo_take(s, 1000) over $FRAG single-ID free ranges, IDs/s | 1 | round $1 | $v | $((FRAG * 1000000000 / (end - start)))"
    done
}
# fragpush ROUND
fragpush() {
    local order="old new" v kind name
    [ $(($1 % 2)) = 0 ] && order="new old"
    for v in $order; do
        D=${DIRS[$v]}
        local psql="as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p ${PORTS[$v]} -d postgres -qAtX"
        for kind in frag flat; do
            name=fp_${kind}_$1
            # What to push, made before the timing starts.
            $psql -c "SET client_min_messages = warning" \
                -c "CREATE TABLE IF NOT EXISTS fp (name text PRIMARY KEY, m int8multirange)" \
                -c "SELECT hilo_create('$name')" \
                -c "INSERT INTO fp SELECT '$name', range_agg(int8range(x, x, '[]')) FROM (
                      SELECT x FROM unnest(hilo_take('$name', $((2 * FRAG)))) r,
                                    generate_series(lower(r), upper(r) - 1) x
                       WHERE '$kind' = 'flat' OR (x - lower(r)) % 2 = 0
                       ORDER BY x LIMIT $FRAG) h" >/dev/null
            sleep 1.5 # the allocator's merge pass after the take, if any
        done
        for kind in frag flat; do
            name=fp_${kind}_$1
            ms() { $psql -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }
            echo "hilo_push of $FRAG IDs ($kind), ms | 1 | round $1 | $v | $(ms "SELECT hilo_push('$name', (SELECT m FROM fp WHERE name = '$name'))")"
            sleep 1.5 # the merge pass after the push
            echo "hilo_take(s, 1000) after it ($kind), ms | 1 | round $1 | $v | $(ms "SELECT count(*) FROM unnest(hilo_take('$name', 1000))")"
            echo "$FRAG hilo_nextval after it ($kind), ms | 1 | round $1 | $v | $(ms "SELECT count(hilo_nextval('$name')) FROM generate_series(1, $FRAG)")"
        done
    done
}
MERGE_FRAG=${MERGE_FRAG:-200000}
MERGE_SEQS=${MERGE_SEQS:-65}
if [ -n "${MERGE:-}" ]; then
    for v in old new; do
        as_pg ${DIRS[$v]}/pg/usr/lib/postgresql/15/bin/psql -h ${DIRS[$v]} -p ${PORTS[$v]} -d postgres -qAtX \
            -c "SELECT hilo_create('frag', block_size => 10)" \
            -c "SELECT hilo_push('frag', (SELECT range_agg(int8range(x, x, '[]'))
                  FROM unnest(hilo_take('frag', $((2 * MERGE_FRAG)))) r,
                       generate_series(lower(r), upper(r) - 1, 2) x))" \
            -c "SELECT count(hilo_create('atk' || k, block_size => 1)) FROM generate_series(1, $MERGE_SEQS) k" \
            -c "SELECT hilo_create('v', block_size => 10)" >/dev/null
    done
    sleep 5 # the merge passes of the set-up
fi
PUSHES=$(mktemp /tmp/hilo-ab.XXXXXX.sql)
chmod 644 "$PUSHES"
echo "SELECT count(hilo_push('atk' || k, hilo_take('atk' || k, 2))) FROM generate_series(1, $MERGE_SEQS) k" >"$PUSHES"
LAT=$(mktemp -d /tmp/hilo-ab-lat.XXXXXX)
chmod 777 "$LAT"
# merge ROUND
merge() {
    local order="old new"
    [ $(($1 % 2)) = 0 ] && order="new old"
    echo "SELECT hilo_take('v', 100)" >"$SCRIPT"
    local what="hilo_take(v, 100) beside pushes to $MERGE_SEQS sequences, $MERGE_FRAG free rows"
    for v in $order; do
        D=${DIRS[$v]}
        local bench="as_pg $D/pg/usr/lib/postgresql/15/bin/pgbench -n -T $SECONDS_PER_RUN -h $D -p ${PORTS[$v]}"
        rm -f "$LAT"/*
        $bench -c 1 -f "$PUSHES" postgres >"$LAT/pushes.out" 2>/dev/null &
        local pusher=$! out
        out=$($bench -M prepared -c 2 -j 2 -l --log-prefix="$LAT/lat" -f "$SCRIPT" postgres 2>/dev/null)
        wait $pusher
        # Per-transaction latencies (microseconds, third column), sorted.
        cat "$LAT"/lat.* | awk '{ print $3 }' | sort -n >"$LAT/sorted"
        local n p99 max
        n=$(wc -l <"$LAT/sorted")
        p99=$(sed -n "$(((n * 99 + 99) / 100))p" "$LAT/sorted")
        max=$(tail -1 "$LAT/sorted")
        echo "$what: tps | 2 | round $1 | $v | $(echo "$out" | sed -n 's/^tps = \([0-9.]*\).*/\1/p')"
        echo "... latency average, ms | 2 | round $1 | $v | $(echo "$out" | sed -n 's/^latency average = \([0-9.]*\).*/\1/p')"
        echo "... latency p99, ms | 2 | round $1 | $v | $(awk -v u="$p99" 'BEGIN { printf "%.1f", u / 1000 }')"
        echo "... latency max, ms | 2 | round $1 | $v | $(awk -v u="$max" 'BEGIN { printf "%.1f", u / 1000 }')"
        echo "... the pushes' tps ($MERGE_SEQS sequences each) | 1 | round $1 | $v | $(sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$LAT/pushes.out")"
    done
}
CPU_TAKES=${CPU_TAKES:-1500}
cpu() {
    local order="old new" c t
    [ $(($1 % 2)) = 0 ] && order="new old"
    echo "SELECT hilo_take('big', 1000000)" >"$SCRIPT"
    for c in 1 16; do
        t=$((c == 1 ? CPU_TAKES : CPU_TAKES / 4))
        for v in $order; do
            D=${DIRS[$v]}
            local psql="as_pg $D/pg/usr/lib/postgresql/15/bin/psql -h $D -p ${PORTS[$v]} -d postgres -qAtX"
            $psql -c "SELECT hilo_take('big', 1000000)" >/dev/null # the allocator runs
            local pid before after
            pid=$($psql -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'hilo allocator'
                             AND datname = current_database()")
            before=$(awk '{ print $14 + $15 }' /proc/$pid/stat)
            as_pg $D/pg/usr/lib/postgresql/15/bin/pgbench -n -M prepared -t "$t" -c "$c" \
                -j "$((c < 2 ? 1 : 2))" -h $D -p ${PORTS[$v]} -f "$SCRIPT" postgres >/dev/null 2>&1
            after=$(awk '{ print $14 + $15 }' /proc/$pid/stat)
            echo "allocator CPU per hilo_take('big', 1000000), us | $c | round $1 | $v | $(((after - before) * 1000000 / $(getconf CLK_TCK) / (c * t)))"
        done
    done
}
for r in $(seq 1 "$ROUNDS"); do
    if [ -n "${MANY:-}" ]; then
        many $r
    elif [ -n "${CPU:-}" ]; then
        cpu $r
    elif [ -n "${COLD:-}" ]; then
        cold $r
    elif [ -n "${MERGE:-}" ]; then
        merge $r
    elif [ -n "${FRAGMENTED:-}" ]; then
        frag $r
    elif [ -n "${FRAGPUSH:-}" ]; then
        fragpush $r
    elif [ -n "${LEASE:-}" ]; then
        e="(SELECT epoch FROM hilo.cluster), (SELECT (config->>'cluster_id')::bigint FROM hilo.cluster)"
        grant="SELECT ok FROM hilo._lease_handle($e, 7, ARRAY['acc' || :client_id], '{2}', '{1}', '{65543}', '{65543}', '{7}', ARRAY[nextval('bounds')])"
        run "$grant" 1 $r
        run "$grant" 3 $r
        run "SELECT ok FROM hilo._lease_handle($e, 7, ARRAY['acc' || :client_id], '{0}', '{1}', '{0}', '{0}', '{0}', '{0}')" 3 $r
    elif [ -n "${PUSH:-}" ]; then
        run "SELECT hilo_push('s', hilo_take('s', 10))" 2 $r
        run "SELECT hilo_take('s', 10)" 2 $r
    elif [ -n "${ALLOCATOR:-}" ]; then
        for c in 1 4 16; do
            run "SELECT hilo_take('big', 1000000)" $c $r
            run "INSERT INTO sync_t VALUES (1)" $c $r
        done
        run "SELECT hilo_take('s', 10)" 8 $r
        run "SELECT 1" 8 $r
    else
        for q in "SELECT hilo_take('s', 1)" "SELECT hilo_take('s', 10)" "SELECT hilo_nextval('s')"; do
            run "$q" 2 $r
        done
    fi
done
rm -rf "$SCRIPT" "$PUSHES" "$LAT"
