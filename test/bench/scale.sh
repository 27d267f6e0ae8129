#!/usr/bin/env bash
# "No cliffs": the four families of cost that grow with the work,
# measured side by side on one server in one run (interleaved rounds,
# median and spread per cell, ratios to a baseline measured in the same
# round), against the targets of the issue:
#   1. fragmented free lists: push, hilo_nextval, hilo_take(s, 1000) and the
#      allocator's merge pass with FRAG_IDS/2 single-ID free ranges against
#      one free range of the same size; the push again with
#      max_connections = BIG_CONNECTIONS; backend (and allocator) peak
#      memory for a push and a take of MEM_RANGES ranges;
#   2. many sequences: MANY_SEQS sequences used by 8 pgbench clients (by
#      random and by a per-client counter) against one sequence and
#      against the same statements with k always 1; one
#      session using SESSION_SEQS sequences in turn; errors counted;
#   3. keys: one-row INSERTs at 2, 8 and 32 clients with the primary key
#      from bigserial, hilo_nextval, identity CACHE 1000, a UUIDv7 function
#      and gen_random_uuid(): tps ratio to bigserial, index bytes per row
#      after the run and after VACUUM, avg_leaf_density (pgstattuple);
#   4. takes through the allocator: hilo_take(s, 10^6) at 1, 4 and 16
#      clients against a synchronous one-row INSERT, hilo_take(s, 10) at 8
#      clients against SELECT 1, takes per allocator transaction (estimated
#      from transaction IDs), and a perf profile of the allocator during
#      an extra large-take run.
# Prints the tables and writes them to docs/bench/scale.md (BENCH_DOC).
# A benchmark, not a test: it reports, it never fails on a number, and it
# is not part of scripts/test.sh.
#
#   test/bench/scale.sh            full run (about 30 minutes; on main at
#                                  the time of writing family 1 alone takes
#                                  several minutes, hilo_nextval over
#                                  100,000 fragments being ~30 s a round)
#   QUICK=1 test/bench/scale.sh    quick run to check the harness (2 to 3
#                                  minutes): 1 round, 3 s per pgbench run,
#                                  a tenth of the sizes
#   FAMILIES="1" test/bench/scale.sh   only family 1 (any list of 1 to 4);
#                                  the doc says "not run" for the others
#   Every size can be set alone: ROUNDS, PGBENCH_SECONDS, FRAG_IDS,
#   MEM_RANGES, BIG_CONNECTIONS, MANY_SEQS, SESSION_SEQS, SESSION_CALLS,
#   PERF_SECONDS, BENCH_DOC; BENCH_HEADING, the paragraph under the doc's title.
#
# Run it on an otherwise idle machine: every number is compared with another
# measured in the same round, but a busy machine makes the ratios noisy too.
source "$(dirname "$0")/lib.sh"
setting ROUNDS 3 1
setting PGBENCH_SECONDS 10 3
setting FRAG_IDS 200000 20000
setting MEM_RANGES 500000 50000
setting BIG_CONNECTIONS 1000
setting MANY_SEQS 10000 1000
setting SESSION_SEQS 1000 200
setting SESSION_CALLS 1000000 100000
setting PERF_SECONDS 10 3
# FAMILIES="1 3": run only those families; the doc says "not run" for the others.
setting FAMILIES "1 2 3 4"
want() { case " $FAMILIES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
FRAGMENTS=$((FRAG_IDS / 2))

ensure_packages
ensure_packages linux-perf
# auto_explain is how the allocator's merge pass is seen: with
# log_nested_statements its SPI statements are logged with their duration
# (only while family 1 runs; off, it costs nothing).
bench_server 54360 "shared_preload_libraries = 'hilo,auto_explain'" \
    "auto_explain.log_min_duration = -1" "auto_explain.log_nested_statements = on" \
    "shared_buffers = 256MB" "max_wal_size = 8GB" "checkpoint_timeout = 30min" "jit = off"
# Client sessions never log plans: only the allocator (which reads the
# configuration file) does, so no measured call pays for auto_explain.
export PGOPTIONS='-c auto_explain.log_min_duration=-1'
restart() { as_pg "$PG_BIN/pg_ctl" -D "$DIR/data" -l "$DIR/server.log" -w restart "$@" >/dev/null; }

# "min-max" of the values, or "-" with one value.
spread() { tr ' ' '\n' | grep . | sort -g | awk '{v[NR]=$1} END{if (NR < 2) print "-"; else printf "%s-%s", v[1], v[NR]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.3f", a / b }'; }
# verdict VALUE OP LIMIT: "met" or "missed (VALUE vs LIMIT, x FACTOR)".
verdict() {
    awk -v v="$1" -v op="$2" -v l="$3" 'BEGIN{
        if (v == "-") { print "not measured"; exit }
        ok = (op == "<=") ? (v <= l) : (v >= l)
        if (ok) print "met"
        else if (op == "<=") printf "missed: %s, %.2f times the limit %s\n", v, v / l, l
        else printf "missed: %s, short of %s by %.0f%%\n", v, l, (l - v) * 100 / l }'
}

# pgbench FILE CLIENTS SECONDS [OPTIONS...]: prints "tps errors"; errors are
# the error and abort lines pgbench reported.
PGB_N=0
pgb() {
    local file=$1 clients=$2 secs=$3 out err tps errors
    shift 3
    PGB_N=$((PGB_N + 1))
    out=$DIR/pgb.$PGB_N.out err=$DIR/pgb.$PGB_N.err
    as_pg "$PG_BIN/pgbench" -h "$DIR" -p "$PORT" -n -M prepared -c "$clients" \
        -j "$((clients < 2 ? 1 : 2))" -T "$secs" -f "$file" "$@" postgres >"$out" 2>"$err" || true
    tps=$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' "$out")
    errors=$(grep -c -i -E 'error|aborted' "$err" || true)
    printf '%.0f %s\n' "${tps:-0}" "$errors"
}
script() { # script NAME TEXT: a pgbench script file
    printf '%s\n' "$2" >"$DIR/$1.sql"
    chown "$PG_USER" "$DIR/$1.sql"
    echo "$DIR/$1.sql"
}

q <<'SQL'
CREATE EXTENSION hilo;
CREATE EXTENSION pgstattuple;
-- UUIDv7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, with
-- version 7 and the variant set; PostgreSQL 15 has no uuidv7().
CREATE FUNCTION uuidv7() RETURNS uuid LANGUAGE sql VOLATILE AS $$
  SELECT encode(set_bit(set_bit(overlay(uuid_send(gen_random_uuid())
           PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
           FROM 1 FOR 6), 52, 1), 53, 1), 'hex')::uuid
$$;
-- Peak resident memory (VmHWM, kB) of a process, from /proc.
CREATE FUNCTION vm_kb(pid int, field text) RETURNS bigint LANGUAGE sql AS $$
  SELECT (regexp_match(pg_read_file('/proc/' || pid || '/status'), field || ':\s+(\d+)'))[1]::bigint
$$;
CREATE FUNCTION allocator_pid() RETURNS int LANGUAGE sql AS $$
  SELECT pid FROM pg_stat_activity
   WHERE datname = current_database() AND backend_type ILIKE '%hilo%' ORDER BY pid LIMIT 1
$$;
-- fragments(seq, n, step): takes n IDs and returns, as a multirange, every
-- step-th of them (step 2: n/2 single-ID ranges) or, with step 0, the first
-- n/2 of them (ranges as few as the take gave, normally one).
CREATE FUNCTION fragments(seq text, n bigint, step int) RETURNS int8multirange LANGUAGE sql AS $$
  SELECT CASE WHEN step > 0
    THEN (SELECT range_agg(int8range(x, x, '[]'))
            FROM unnest(hilo_take(seq, n)) r, generate_series(lower(r), upper(r) - 1, step) x)
    ELSE (SELECT range_agg(int8range(x, x, '[]'))
            FROM (SELECT x FROM unnest(hilo_take(seq, n)) r, generate_series(lower(r), upper(r) - 1) x
                   ORDER BY x LIMIT n / 2) h)
  END
$$;
CREATE TABLE pushes (name text PRIMARY KEY, m int8multirange);
SQL

########################################################################
# 1. Fragmented free lists
########################################################################
if want 1; then
log "1. fragmented free lists: $FRAGMENTS fragments vs one range of $FRAGMENTS, $ROUNDS rounds"
# prepare NAME STEP: a sequence NAME and, in table pushes, what to push.
prepare() {
    q -c "SELECT hilo_create('$1')" -c "INSERT INTO pushes SELECT '$1', fragments('$1', $FRAG_IDS, $2)" >/dev/null
}
push_ms() { time_ms -c "SELECT hilo_push('$1', (SELECT m FROM pushes WHERE name = '$1'))"; }
# merge_ms OFFSET: the duration auto_explain logged for the allocator's
# merge statement after byte OFFSET of the server log, waiting up to 10 s;
# "-" if none was logged (below the 1 ms threshold, or no pass).
merge_ms() {
    local off=$1 ms="" i
    for i in $(seq 1 20); do
        ms=$(tail -c +"$((off + 1))" "$DIR/server.log" |
            awk '/duration: [0-9.]+ ms/ { match($0, /duration: [0-9.]+/); d = substr($0, RSTART + 10, RLENGTH - 10) }
                 /Query Text: WITH marked AS/ { print d; exit }')
        [ -n "$ms" ] && break
        sleep 0.5
    done
    echo "${ms:--}"
}
declare -A F
q -c "ALTER SYSTEM SET auto_explain.log_min_duration = '1ms'" -c "SELECT pg_reload_conf()" >/dev/null
for round in $(seq 1 "$ROUNDS"); do
    for kind in frag flat; do
        name=${kind}_$round
        step=$([ $kind = frag ] && echo 2 || echo 0)
        prepare "$name" "$step"
        sleep 1.5 # the allocator's merge pass after the takes, if any
        off=$(stat -c %s "$DIR/server.log")
        F[push,$kind]+=" $(push_ms "$name")"
        F[merge,$kind]+=" $(merge_ms "$off")"
        # Then one ID pushed beside them (one the take handed out and the
        # push kept): the merge pass it triggers, with the whole list still
        # on hilo.free_ranges. First a moment for any pass still running
        # (an allocator's first pass reads everything; under load the
        # push's own pass can end after the next push began).
        sleep 1.5
        off=$(stat -c %s "$DIR/server.log")
        q -c "SELECT hilo_push('$name', int8multirange(int8range(x, x, '[]')))
                FROM (SELECT upper((SELECT r FROM unnest(m) r LIMIT 1)) AS x
                        FROM pushes WHERE name = '$name') t" >/dev/null
        F[merge1,$kind]+=" $(merge_ms "$off")"
        out=$(q -c '\timing on' -c "SELECT count(*) FROM unnest(hilo_take('$name', 1000))")
        F[take,$kind]+=" $(echo "$out" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p')"
        F[take_ranges,$kind]+=" $(echo "$out" | head -1)"
        F[nextval,$kind]+=" $(time_ms -c "SELECT count(hilo_nextval('$name')) FROM generate_series(1, $FRAGMENTS)")"
        # The floor of one catalog row per free range: the same ranges as
        # rows of a table shaped like hilo.free_ranges (its columns,
        # constraint and primary key), written by COPY (heap_multi_insert
        # and an index entry per row, as the push writes them) and deleted
        # again by one DELETE (as the refills that hand them out do).
        q -c "CREATE TABLE rows_$name (LIKE hilo.free_ranges INCLUDING ALL)" \
            -c "COPY (SELECT 1, lower(r), upper(r) - 1 FROM pushes, unnest(m) r WHERE name = '$name')
                  TO '$DIR/rows_$name.copy'" >/dev/null
        F[copy,$kind]+=" $(time_ms -c "COPY rows_$name FROM '$DIR/rows_$name.copy'")"
        F[delete,$kind]+=" $(time_ms -c "DELETE FROM rows_$name")"
        q -c "DROP TABLE rows_$name" >/dev/null
        rm -f "$DIR/rows_$name.copy"
    done
done
q -c "ALTER SYSTEM SET auto_explain.log_min_duration = -1" -c "SELECT pg_reload_conf()" >/dev/null

log "1. push with max_connections = $BIG_CONNECTIONS"
big_ok=yes
echo "max_connections = $BIG_CONNECTIONS" >>"$DIR/data/postgresql.conf"
if restart; then
    for round in $(seq 1 "$ROUNDS"); do
        for kind in frag flat; do
            name=${kind}_big_$round
            prepare "$name" "$([ $kind = frag ] && echo 2 || echo 0)"
            F[pushbig,$kind]+=" $(push_ms "$name")"
        done
    done
else
    big_ok="no: the server did not start with max_connections = $BIG_CONNECTIONS"
    tail -5 "$DIR/server.log"
fi
sed -i '$d' "$DIR/data/postgresql.conf" # back to the default
restart

log "1. memory: push and take of $MEM_RANGES ranges"
MEM_IDS=$((MEM_RANGES * 2))
q -c "SELECT hilo_create('mem')" -c "INSERT INTO pushes SELECT 'mem', fragments('mem', $MEM_IDS, 2)" >/dev/null
# Each in a fresh session: the peak before and after, in kB.
read -r push_hwm0 push_hwm1 push_shm <<<"$(q -F ' ' <<'SQL'
SELECT vm_kb(pg_backend_pid(), 'VmHWM') AS h0 \gset
SELECT hilo_push('mem', (SELECT m FROM pushes WHERE name = 'mem')) \g /dev/null
SELECT :h0, vm_kb(pg_backend_pid(), 'VmHWM'), vm_kb(pg_backend_pid(), 'RssShmem');
SQL
)"
sleep 1.5
read -r take_hwm0 take_hwm1 take_shm take_ranges alloc_hwm0 alloc_hwm1 <<<"$(q -F ' ' <<SQL
SELECT vm_kb(pg_backend_pid(), 'VmHWM') AS h0, coalesce(vm_kb(allocator_pid(), 'VmHWM'), 0) AS a0 \gset
SELECT count(*) AS n FROM unnest(hilo_take('mem', $MEM_RANGES)) \gset
SELECT :h0, vm_kb(pg_backend_pid(), 'VmHWM'), vm_kb(pg_backend_pid(), 'RssShmem'), :n,
       :a0, coalesce(vm_kb(allocator_pid(), 'VmHWM'), 0);
SQL
)"
mb() { awk -v k="$1" 'BEGIN{printf "%.1f", k / 1024}'; }
push_mb=$(mb "$push_hwm1") push_grow=$(mb "$((push_hwm1 - push_hwm0))")
take_mb=$(mb "$take_hwm1") take_grow=$(mb "$((take_hwm1 - take_hwm0))")

cell() { # cell KEY KIND: "median (spread)"
    local v=${F[$1,$2]:-}
    echo "$(echo "$v" | median) ($(echo "$v" | spread))"
}
med() { echo "${F[$1,$2]:-}" | median; }
per_call_ratio=$(ratio "$(med nextval frag)" "$(med nextval flat)")
push_ratio=$(ratio "$(med push frag)" "$(med push flat)")
pushbig_ratio=$(ratio "$(med pushbig frag)" "$(med push frag)")
take_ratio=$(ratio "$(med take frag)" "$(med take flat)")
FRAG_TABLE="| operation | fragmented ms | one range ms | ratio | target |
|---|---:|---:|---:|---|
| the push itself | $(cell push frag) | $(cell push flat) | $push_ratio | at most 10: $(verdict "$push_ratio" '<=' 10) |
| the push, max_connections = $BIG_CONNECTIONS | $(cell pushbig frag) | $(cell pushbig flat) | $(ratio "$(med pushbig frag)" "$(med pushbig flat)") | fragmented push / the same at default max_connections = $pushbig_ratio, independent of max_connections (at most 1.1): $(verdict "$pushbig_ratio" '<=' 1.1) |
| $FRAGMENTS hilo_nextval, fresh session | $(cell nextval frag) | $(cell nextval flat) | $per_call_ratio | at most 2 per call: $(verdict "$per_call_ratio" '<=' 2) |
| hilo_take(s, 1000), fresh session | $(cell take frag) | $(cell take flat) | $take_ratio | O(ranges returned): $(med take_ranges frag) vs $(med take_ranges flat) ranges returned |
| reference: the same ranges as rows of hilo.free_ranges' shape, by COPY | $(cell copy frag) | $(cell copy flat) | $(ratio "$(med copy frag)" "$(med push flat)") | the rows alone, against the one-range push: a push of one row per range cannot go below this ratio |
| reference: those rows deleted by one DELETE | $(cell delete frag) | $(cell delete flat) | $(ratio "$(med delete frag)" "$(med nextval flat)") | the deletes alone, against the one-range hilo_nextval run: the fragmented run pays about this on top of that run, so its ratio is about 1 + this |
| allocator merge pass (auto_explain) | $(cell merge frag) | $(cell merge flat) | - | must not read the whole free list each pass (\"-\": none logged above 1 ms) |
| merge pass after one more ID pushed beside them | $(cell merge1 frag) | $(cell merge1 flat) | $(ratio "$(med merge1 frag)" "$(med merge frag)") | reads what the push freed, not the list: fragmented one-ID pass / fragmented push's pass (much below 1 if so) |"
MEM_TABLE="| $MEM_RANGES ranges | backend peak (VmHWM) MB | growth during the call MB | backend shared memory touched MB | target |
|---|---:|---:|---:|---|
| hilo_push | $push_mb | $push_grow | $(mb "$push_shm") | under 100 MB: $(verdict "$push_mb" '<=' 100) |
| hilo_take (returned $take_ranges ranges) | $take_mb | $take_grow | $(mb "$take_shm") | under 100 MB: $(verdict "$take_mb" '<=' 100) |
| the allocator during that take | $(mb "$alloc_hwm1") | $(mb "$((alloc_hwm1 - alloc_hwm0))") | - | - |"
echo "$FRAG_TABLE"
echo "$MEM_TABLE"

fi # family 1

########################################################################
# 2. Many sequences
########################################################################
if want 2; then
log "2. many sequences: creating $MANY_SEQS"
q -c "SELECT count(hilo_create('m' || g)) FROM generate_series(1, $MANY_SEQS) g" >/dev/null
one=$(script many_one "SELECT hilo_nextval('m' || 1);")
rnd=$(script many_rnd "\\set k random(1, $MANY_SEQS)
SELECT hilo_nextval('m' || :k);")
# A per-client counter, clients starting apart: round-robin over them all.
ctr=$(script many_ctr "\\set i :i + 1
SELECT hilo_nextval('m' || ((:i * 8 + :client_id) % $MANY_SEQS + 1));")
# The same two statements with k always 1: what the many-sequence runs cost
# beyond one sequence, without what pgbench and the server spend on the
# statement itself (its variables, its arithmetic; several percent).
rnd1=$(script many_rnd1 "\\set k random(1, 1)
SELECT hilo_nextval('m' || :k);")
ctr1=$(script many_ctr1 "\\set i :i + 1
SELECT hilo_nextval('m' || ((:i * 8 + :client_id) % 1 + 1));")
# Warm-up, not measured: the first use of each sequence on the server makes
# its pool and waits for the allocator's first refill of it (MANY_SEQS
# refills, a few ms each, shared by 8 sessions' commits); the measured runs
# show the steady state of the pools, in new sessions (whose first look at
# each sequence is measured).
for c in $(seq 0 7); do
    q -c "SELECT count(hilo_nextval('m' || g)) FROM generate_series(1, $MANY_SEQS) g WHERE g % 8 = $c" >/dev/null &
done
wait
declare -A M ME
for round in $(seq 1 "$ROUNDS"); do
    for s in one rnd rnd1 ctr ctr1; do
        read -r t e <<<"$(pgb "$DIR/many_$s.sql" 8 "$PGBENCH_SECONDS" -D i=0)"
        M[$s]+=" $t"
        ME[$s]=$((${ME[$s]:-0} + e))
    done
    # One session, SESSION_SEQS sequences in turn against one sequence.
    for s in one many; do
        n=$([ $s = one ] && echo 1 || echo "$SESSION_SEQS")
        M[sess_$s]+=" $(time_ms -c "SELECT count(hilo_nextval('m' || (g % $n + 1))) FROM generate_series(1, $SESSION_CALLS) g")"
    done
    M[buffers]+=" $(q -c "SELECT count(hilo_nextval('m' || (g % $SESSION_SEQS + 1))) FROM generate_series(1, $SESSION_CALLS) g" \
        -c "SELECT count(*) FROM hilo.buffers WHERE pid = pg_backend_pid()" | tail -1)"
done
mmed() { echo "${M[$1]}" | median; }
mcell() { echo "$(mmed "$1") ($(echo "${M[$1]}" | spread))"; }
r_rnd=$(ratio "$(mmed rnd)" "$(mmed one)")
r_ctr=$(ratio "$(mmed ctr)" "$(mmed one)")
r_rnd1=$(ratio "$(mmed rnd)" "$(mmed rnd1)")
r_ctr1=$(ratio "$(mmed ctr)" "$(mmed ctr1)")
r_sess=$(ratio "$(mmed sess_one)" "$(mmed sess_many)")
MANY_TABLE="| workload | median (spread) | errors | ratio to one sequence | ratio to its statement with k = 1 | target |
|---|---:|---:|---:|---:|---|
| 8 clients, one sequence, tps | $(mcell one) | ${ME[one]} | 1 | - | - |
| 8 clients, $MANY_SEQS sequences by random, tps | $(mcell rnd) | ${ME[rnd]} | $r_rnd | $r_rnd1 | at least 0.9, no error: $(verdict "$r_rnd" '>=' 0.9) |
| 8 clients, $MANY_SEQS sequences round-robin (counter), tps | $(mcell ctr) | ${ME[ctr]} | $r_ctr | $r_ctr1 | at least 0.9, no error: $(verdict "$r_ctr" '>=' 0.9) |
| 8 clients, the random statement with k = 1, tps | $(mcell rnd1) | ${ME[rnd1]} | $(ratio "$(mmed rnd1)" "$(mmed one)") | 1 | - |
| 8 clients, the counter statement with k = 1, tps | $(mcell ctr1) | ${ME[ctr1]} | $(ratio "$(mmed ctr1)" "$(mmed one)") | 1 | - |
| one session, $SESSION_CALLS calls on one sequence, ms | $(mcell sess_one) | - | 1 | - | - |
| one session, $SESSION_CALLS calls over $SESSION_SEQS sequences in turn, ms | $(mcell sess_many) | - | $r_sess (speed) | - | keeps its buffers: $(mmed buffers) of $SESSION_SEQS buffers held after the calls |"
echo "$MANY_TABLE"

fi # family 2

########################################################################
# 3. Keys as dense as bigserial's
########################################################################
if want 3; then
log "3. keys: one-row INSERTs, ${PGBENCH_SECONDS}s per run, $ROUNDS rounds"
KEYS=("bigserial|bigserial PRIMARY KEY"
    "hilo_nextval|bigint PRIMARY KEY DEFAULT hilo_nextval('keys')"
    "identity CACHE 1000|bigint GENERATED BY DEFAULT AS IDENTITY (CACHE 1000) PRIMARY KEY"
    "uuidv7|uuid PRIMARY KEY DEFAULT uuidv7()"
    "gen_random_uuid()|uuid PRIMARY KEY DEFAULT gen_random_uuid()")
q -c "SELECT hilo_create('keys')" >/dev/null
i=0
for k in "${KEYS[@]}"; do
    i=$((i + 1))
    q -c "CREATE TABLE k$i (id ${k#*|}, payload int)"
    script "ins$i" "INSERT INTO k$i (payload) VALUES (1);" >/dev/null
done
declare -A K
for round in $(seq 1 "$ROUNDS"); do
    for clients in 2 8 32; do
        for i in $(seq 1 ${#KEYS[@]}); do
            q -c "TRUNCATE k$i" -c "CHECKPOINT"
            read -r t e <<<"$(pgb "$DIR/ins$i.sql" "$clients" "$PGBENCH_SECONDS")"
            K[tps,$clients,$i]+=" $t"
            K[err,$clients,$i]=$((${K[err,$clients,$i]:-0} + e))
            read -r rows bpr <<<"$(q -F ' ' -c "SELECT count(*), round(pg_relation_size('k${i}_pkey')::numeric / greatest(count(*), 1), 1) FROM k$i")"
            K[rows,$clients,$i]+=" $rows"
            K[bpr,$clients,$i]+=" $bpr"
            q -c "VACUUM k$i"
            read -r bpr2 dens <<<"$(q -F ' ' -c "SELECT round(pg_relation_size('k${i}_pkey')::numeric / greatest((SELECT count(*) FROM k$i), 1), 1), avg_leaf_density FROM pgstatindex('k${i}_pkey')")"
            K[bprv,$clients,$i]+=" $bpr2"
            K[dens,$clients,$i]+=" $dens"
        done
    done
done
kmed() { echo "${K[$1]}" | median; }
KEY_TABLE="| clients | key | tps median (spread) | errors | tps / bigserial | rows per run | PK bytes per row after the run | after VACUUM | avg_leaf_density % | bytes per row / bigserial |
|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
KEY_TARGETS=""
for clients in 2 8 32; do
    i=0
    for k in "${KEYS[@]}"; do
        i=$((i + 1))
        tr_=$(ratio "$(kmed "tps,$clients,$i")" "$(kmed "tps,$clients,1")")
        br=$(ratio "$(kmed "bprv,$clients,$i")" "$(kmed "bprv,$clients,1")")
        KEY_TABLE+="
| $clients | ${k%%|*} | $(kmed "tps,$clients,$i") ($(echo "${K[tps,$clients,$i]}" | spread)) | ${K[err,$clients,$i]} | $tr_ | $(kmed "rows,$clients,$i") | $(kmed "bpr,$clients,$i") | $(kmed "bprv,$clients,$i") | $(kmed "dens,$clients,$i") | $br |"
        if [ "$i" = 2 ]; then
            KEY_TARGETS+="- $clients clients: hilo_nextval tps / bigserial = $tr_ (target at least 1): $(verdict "$tr_" '>=' 1); index bytes per row / bigserial = $br (target at most 1.05): $(verdict "$br" '<=' 1.05)
"
        fi
    done
done
echo "$KEY_TABLE"
echo "$KEY_TARGETS"

fi # family 3

########################################################################
# 4. Takes through the allocator
########################################################################
if want 4; then
log "4. takes through the allocator, ${PGBENCH_SECONDS}s per run, $ROUNDS rounds"
q -c "SELECT hilo_create('big')" -c "SELECT hilo_create('small')" -c "CREATE TABLE sync_t (v int)"
script take_big "SELECT hilo_take('big', 1000000);" >/dev/null
script insert1 "INSERT INTO sync_t VALUES (1);" >/dev/null
script take_small "SELECT hilo_take('small', 10);" >/dev/null
script select1 "SELECT 1;" >/dev/null
# The next transaction ID not yet assigned; a take does not write in the
# caller's transaction, so during a take-only run the IDs assigned are the
# allocator's transactions (and autovacuum's, rarely).
next_xid() { q -c "SELECT pg_snapshot_xmax(pg_current_snapshot())"; }
# Calibration: whether the caller's transaction of a take gets a
# transaction ID, and how many IDs one lone take assigns in all.
read -r caller_xid lone_xids <<<"$(q -F ' ' <<'SQL'
SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS x0 \gset
BEGIN;
SELECT hilo_take('big', 1000000) \g /dev/null
SELECT pg_current_xact_id_if_assigned() IS NOT NULL AS caller \gset
COMMIT;
SELECT :'caller', pg_snapshot_xmax(pg_current_snapshot())::text::bigint - :x0;
SQL
)"
# The whole machine's busy CPU time so far, in clock ticks (/proc/stat's
# first line: user, nice, system, irq, softirq and steal; not idle or
# iowait): every process counts, the server's, the allocator's, pgbench's.
cpu_ticks() { awk '/^cpu /{ print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }
HZ=$(getconf CLK_TCK)
NCPU=$(nproc)
# pgb_cpu FILE CLIENTS KEY: a pgb run whose tps go to T[KEY,CLIENTS], its
# busy CPU microseconds per transaction to T[KEYcpu,CLIENTS] and the share
# of the machine's CPUs it kept busy (%) to T[KEYbusy,CLIENTS]; sets TXNS.
pgb_cpu() {
    local c0 c1 t e n=$((PGB_N + 1))
    c0=$(cpu_ticks)
    read -r t e <<<"$(pgb "$1" "$2" "$PGBENCH_SECONDS")"
    c1=$(cpu_ticks)
    TXNS=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$DIR/pgb.$n.out")
    T[$3,$2]+=" $t"
    T[${3}err,$2]=$((${T[${3}err,$2]:-0} + e))
    T[${3}cpu,$2]+=" $(awk -v c="$((c1 - c0))" -v n="${TXNS:-0}" -v hz="$HZ" 'BEGIN{ if (n > 0) printf "%.1f", c * 1e6 / hz / n; else print "-" }')"
    T[${3}busy,$2]+=" $(awk -v c="$((c1 - c0))" -v s="$PGBENCH_SECONDS" -v hz="$HZ" -v k="$NCPU" 'BEGIN{ printf "%.0f", 100 * c / hz / s / k }')"
}
declare -A T
for round in $(seq 1 "$ROUNDS"); do
    for clients in 1 4 16; do
        x0=$(next_xid)
        pgb_cpu "$DIR/take_big.sql" "$clients" big
        x1=$(next_xid)
        T[per,$clients]+=" $(awk -v n="${TXNS:-0}" -v x="$((x1 - x0 - 1))" 'BEGIN{ if (x > 0) printf "%.3f", n / x; else print "-" }')"
        pgb_cpu "$DIR/insert1.sql" "$clients" ins
    done
    for s in take_small select1; do
        read -r t e <<<"$(pgb "$DIR/$s.sql" 8 "$PGBENCH_SECONDS")"
        T[$s]+=" $t"
        T[${s}err]=$((${T[${s}err]:-0} + e))
    done
done
tmed() { echo "${T[$1]}" | median; }
tcell() { echo "$(tmed "$1") ($(echo "${T[$1]}" | spread))"; }
TAKE_TABLE="| clients | hilo_take(s, 10^6) per s | errors | takes per transaction ID | takes per commit (estimate) | synchronous one-row INSERT per s | ratio | target at least 0.8 | busy CPU per call, take / INSERT, us | their ratio, INSERT / take | CPUs busy, take / INSERT, % |
|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"
for clients in 1 4 16; do
    r=$(ratio "$(tmed "big,$clients")" "$(tmed "ins,$clients")")
    per=$(tmed "per,$clients")
    per_commit=$(awk -v p="$per" -v l="$lone_xids" 'BEGIN{ if (p == "-" || l <= 0) print "-"; else printf "%.2f", p * l }')
    TAKE_TABLE+="
| $clients | $(tcell "big,$clients") | ${T[bigerr,$clients]} | $per | $per_commit | $(tcell "ins,$clients") | $r | $(verdict "$r" '>=' 0.8) | $(tmed "bigcpu,$clients") / $(tmed "inscpu,$clients") | $(ratio "$(tmed "inscpu,$clients")" "$(tmed "bigcpu,$clients")") | $(tmed "bigbusy,$clients") / $(tmed "insbusy,$clients") |"
done
r_small=$(ratio "$(tmed take_small)" "$(tmed select1)")
SMALL_TABLE="| 8 clients | tps median (spread) | errors | ratio to SELECT 1 | target at least 0.9 |
|---|---:|---:|---:|---|
| SELECT 1 | $(tcell select1) | ${T[select1err]} | 1 | - |
| hilo_take(s, 10) | $(tcell take_small) | ${T[take_smallerr]} | $r_small | $(verdict "$r_small" '>=' 0.9) |"
echo "$TAKE_TABLE"
echo "$SMALL_TABLE"

log "4. perf profile of the allocator during a ${PERF_SECONDS}s run of large takes at 16 clients"
PERF_SUMMARY=""
apid=$(q -c "SELECT allocator_pid()")
if [ -z "$apid" ]; then
    PERF_SUMMARY="No allocator process was found (pg_stat_activity), so no profile."
elif ! perf record -e cpu-clock -F 999 -g -o "$DIR/perf.data" -p "$apid" -- sleep 0.2 >/dev/null 2>&1; then
    PERF_SUMMARY="perf record does not work here (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid)), so no profile."
else
    perf record -e cpu-clock -F 999 -g -o "$DIR/perf.data" -p "$apid" -- sleep "$PERF_SECONDS" >/dev/null 2>&1 &
    perf_pid=$!
    pgb "$DIR/take_big.sql" 16 "$PERF_SECONDS" >/dev/null
    wait "$perf_pid" || true
    PERF_SUMMARY="perf record -e cpu-clock -g -p <allocator pid>, ${PERF_SECONDS} s, 16 clients taking 10^6 IDs; top symbols by self time (--no-children):

\`\`\`
$(perf report -i "$DIR/perf.data" --stdio --no-children --sort dso,symbol -g none --percent-limit 0.8 2>/dev/null |
        grep -v '^#' | grep . | sed 's/ *- *- *$//' | head -25)
\`\`\`

The same, with callers included (--children), top entries:

\`\`\`
$(perf report -i "$DIR/perf.data" --stdio --children --sort dso,symbol -g none --percent-limit 3 2>/dev/null |
        grep -v '^#' | grep . | grep -v ' 0x0000\| 0000000000000000\|\[unknown\]' | sed 's/ *- *- *$//' | head -15)
\`\`\`"
fi
echo "$PERF_SUMMARY"
fi # family 4

########################################################################
HEADING=${BENCH_HEADING:-"Full run: $ROUNDS rounds."}
mkdir -p "$(dirname "$DOC")"
set +u # the tables of families not run are empty; their sections are replaced below
cat >"$DOC" <<DOC
# No cliffs: cost as the work grows

$HEADING

Produced by \`test/bench/scale.sh\` on $(date -u +%Y-%m-%d) at commit
$(git -C "$HILO_ROOT" rev-parse --short HEAD)$(git -C "$HILO_ROOT" diff --quiet HEAD -- test/bench src || echo ' (with uncommitted changes)'): PostgreSQL
$("$PG_BIN/postgres" --version | sed 's/.*) //'), $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB, load average at the end
$(cut -d' ' -f1-3 /proc/loadavg). One server, default hilo settings (block_size 1000),
shared_buffers 256MB, jit off. Parameters: ROUNDS=$ROUNDS, PGBENCH_SECONDS=$PGBENCH_SECONDS,
FRAG_IDS=$FRAG_IDS, MEM_RANGES=$MEM_RANGES, BIG_CONNECTIONS=$BIG_CONNECTIONS,
MANY_SEQS=$MANY_SEQS, SESSION_SEQS=$SESSION_SEQS, SESSION_CALLS=$SESSION_CALLS,
PERF_SECONDS=$PERF_SECONDS. Every cell is the median of the rounds, with the
spread (min-max) in parentheses when there was more than one round; rounds
are interleaved (each round measures every case once), and ratios are of
medians. pgbench runs with -M prepared, 2 threads (1 for 1 client),
sharing the cores with the server.

## 1. Fragmented free lists

Per round, two new sequences: one takes $FRAG_IDS IDs and pushes back every
other one ($FRAGMENTS single-ID free ranges, one \`hilo_push\`), the other
takes $FRAG_IDS and pushes back the first $FRAGMENTS as one range. Each call
below runs in a fresh session, in this order: the push, \`hilo_take(s,
1000)\`, then $FRAGMENTS \`hilo_nextval\` (\`count(hilo_nextval(s))\` over
\`generate_series\`). The merge pass is the allocator's SPI statement that
merges adjacent free ranges, as auto_explain (log_nested_statements,
log_min_duration 1 ms, in the server's configuration; every client session
sets it off, so only the allocator logs) logged it after the push: "-" means no pass was
logged above 1 ms. The push with max_connections = $BIG_CONNECTIONS ran
after a restart with that setting (started: $big_ok).

The two reference rows say what one catalog row per free range costs by
itself, whatever hilo does around it: the same ranges as rows of a table
made \`LIKE hilo.free_ranges INCLUDING ALL\`, written by one \`COPY\` (which
writes pages of rows at a time, with an index entry each, as the push does)
and then deleted by one \`DELETE\`. The push's target needs fewer rows than
ranges.

$FRAG_TABLE

Peak memory, in one fresh session each: a push of $MEM_RANGES single-ID
ranges (a take of $MEM_IDS IDs, every other one given back), then a take of
$MEM_RANGES IDs that gets them back. VmHWM is read from
\`/proc/<pid>/status\` with \`pg_read_file\` (\`pg_backend_pid()\`); it counts
the shared memory the backend touched too (the column beside it), so the
growth during the call is the column to compare with the target when
shared buffers dominate.

$MEM_TABLE

## 2. Many sequences

Default settings (\`hilo.max_sequences\` $(q -c 'SHOW hilo.max_sequences'), \`hilo.session_buffers\`
$(q -c "SELECT current_setting('hilo.session_buffers', true)")). $MANY_SEQS sequences, 8
pgbench clients calling \`hilo_nextval('m' || k)\`: k random, or k from a
per-client counter (clients start apart, so all sequences go round), against
\`hilo_nextval('m' || 1)\`, and against the same statement (its pgbench
variables and arithmetic) with k always 1. Before the measured runs, 8 sessions used
every sequence once (not measured), so that every pool exists and has had
its first refill, as on a server in steady use; each pgbench session is
new, so its first look at each sequence is measured. Errors are the error
and abort lines pgbench printed. The session rows time \`count(hilo_nextval('m' || (g % n +
1)))\` over $SESSION_CALLS rows with n = 1 and n = $SESSION_SEQS; "buffers
held" counts the session's rows in \`hilo.buffers\` after such a run.

$MANY_TABLE

## 3. Keys as dense as bigserial's

One row per transaction (\`INSERT INTO t (payload) VALUES (1)\`), the key
from each generator; each run starts from a truncated table and lasts
${PGBENCH_SECONDS} s, so the index holds the rows of one run. uuidv7() is
an SQL function (48 bits of Unix milliseconds, random bits, version 7);
identity is \`GENERATED BY DEFAULT AS IDENTITY (CACHE 1000)\`. Bytes per row
are \`pg_relation_size\` of the primary key over the rows, after the run
and after \`VACUUM\`; avg_leaf_density from \`pgstatindex\` (pgstattuple)
after \`VACUUM\`. Short runs fill few pages; the full run's are the ones to
judge density by.

$KEY_TABLE

Targets (default settings: hilo_nextval at least bigserial's tps, index
bytes per row within 5% of bigserial's):

$KEY_TARGETS
## 4. Takes through the allocator

\`SELECT hilo_take('big', 1000000)\` (each a reservation committed by the
allocator) against \`INSERT INTO sync_t VALUES (1)\` with
synchronous_commit on, at the same client counts. hilo exposes no count of
takes per commit (neither \`hilo.status\` nor \`hilo.pool_stats()\`), so
it is estimated from transaction IDs: "takes per transaction ID" is the
takes pgbench completed over the transaction IDs assigned during the run
(anything else that wrote meanwhile counts too, so it is a lower bound).
Calibration, in this run: the caller's transaction of a lone take got a
transaction ID: $caller_xid (t/f); one lone take assigned $lone_xids
transaction IDs in all. "Takes per commit" is takes per transaction ID
times that, i.e. takes per allocator batch, if a batch of any size costs
what a lone take costs.

"Busy CPU per call" is the whole machine's busy CPU time during the run
(\`/proc/stat\`: user, system, interrupts, steal; every process, pgbench's
too) over the calls completed, and "CPUs busy" that time's share of the
run's $NCPU CPUs. Where the CPUs are all busy, the ratio of rates cannot
be higher than the ratio of CPU per call (INSERT / take); where they are
not, the rest of a call is waiting (wake-ups, the flush).

$TAKE_TABLE

Small takes, served from the pool, 8 clients:

$SMALL_TABLE

### Profile of the allocator

$PERF_SUMMARY

hilo.so has no frame pointers, so callers above \`hilo_spi_exec\` are not
attributed. The profiles of small takes (backend) and large takes
(allocator) before and after the work on these targets, with the CPU cost
per call, are in [take-profile.md](take-profile.md), written by hand.

## What this harness does not measure, and how it approximates

- The merge pass has no timing of its own: auto_explain logs it; a pass
  over the span pushed takes about as long as one over a single range, a
  pass over the whole list as long as the fragmented push's own.
- Takes per commit are estimated from transaction IDs (section 4).
- perf samples cpu-clock (no hardware counters here); frames without
  PostgreSQL's debug symbols are left out of the callers' list.
- Memory per idle sequence is stated in docs/reference.md (about 2 KB of
  catalog rows, measured in TAP 050).
- VmHWM is per process and includes shared memory touched: hence the
  growth column.
DOC
set -u
if [ "$FAMILIES" != "1 2 3 4" ]; then
    # Sections of families not run: their heading and one line.
    awk -v fam=" $FAMILIES " '
        /^## [0-9]\. / { n = substr($2, 1, 1); skip = index(fam, " " n " ") == 0
                         print; if (skip) print "\nNot run in this invocation (FAMILIES=\"" substr(fam, 2, length(fam) - 2) "\").\n"; next }
        /^## / { skip = 0 }
        !skip' "$DOC" >"$DOC.tmp" && mv "$DOC.tmp" "$DOC"
fi
log "written to $DOC"
