# Shared helpers for the benchmarks in test/bench/: source it (it sources
# scripts/lib.sh, which sets HILO_ROOT and PG_BIN).
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib.sh"

# setting NAME DEFAULT [QUICK]: a benchmark's knob, which the caller's
# environment sets (ROWS=1000 test/bench/keys.sh); where it does not,
# DEFAULT, or with QUICK=1 the QUICK value if there is one.
setting() {
    [ -n "${!1:-}" ] && return
    if [ -n "${QUICK:-}" ] && [ $# -gt 2 ]; then
        printf -v "$1" '%s' "$3"
    else
        printf -v "$1" '%s' "$2"
    fi
}

# The file a benchmark writes its tables to: docs/bench/<script>.md, or
# BENCH_DOC.
DOC=${BENCH_DOC:-$HILO_ROOT/docs/bench/$(basename "$0" .sh).md}

# bench_server BASE_PORT [LINE...]: builds hilo, installs it into a private
# copy of PostgreSQL (install_private) and starts one server with it
# (start_cluster with the LINEs) on the first free port from BASE_PORT; DIR
# and PORT say where; it is stopped and removed at exit.
bench_server() {
    local base=$1
    shift
    make -C "$HILO_ROOT" -s -j"$(nproc)"
    make_pg_dir DIR bench
    install_private "$DIR/pg"
    chown -R "$PG_USER": "$DIR"
    PORT=$(free_port "$base")
    trap 'stop_cluster "$DIR"; cleanup_dirs' EXIT
    start_cluster "$DIR" "$PORT" "$@"
}

# q [PSQL ARGS...]: psql on the bench server's database postgres, unaligned
# tuples only, stopping at the first error.
q() { as_pg "$PG_BIN/psql" -h "$DIR" -p "$PORT" -d postgres -X -q -At -v ON_ERROR_STOP=1 "$@"; }
# time_ms [PSQL ARGS...]: milliseconds the last statement takes, measured by
# psql around it (time_ms -c "SELECT ...").
time_ms() { q -c '\timing on' "$@" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1; }

# median and minmax of whitespace-separated numbers on standard input ("-"
# and "-..-" when there are none).
median() {
    tr ' ' '\n' | grep . | sort -g |
        awk '{v[NR]=$1} END{if (NR == 0) print "-"; else print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'
}
minmax() {
    tr ' ' '\n' | grep . | sort -g |
        awk 'NR==1{lo=$1} {hi=$1} END{if (NR == 0) print "-..-"; else printf "%.0f..%.0f", lo, hi}'
}

# take_latency_sql SEQUENCE ROUNDS: SQL that times ROUNDS rounds of hilo_take
# of SEQUENCE for n = 1 .. 10^12, one call of each n per round (interleaved,
# so drift hits all alike), each timed with clock_timestamp() inside the
# server, into a new table latency (n, us).
take_latency_sql() {
    cat <<SQL
CREATE TABLE latency (n bigint, us double precision);
DO \$\$
DECLARE
    t0 timestamptz;
    n bigint;
BEGIN
    FOR i IN 1..$2 LOOP
        FOREACH n IN ARRAY ARRAY[1, 1000, 1000000, 1000000000, 1000000000000]::bigint[] LOOP
            t0 := clock_timestamp();
            PERFORM hilo_take('$1', n);
            INSERT INTO latency VALUES (n, extract(epoch FROM clock_timestamp() - t0) * 1e6);
        END LOOP;
    END LOOP;
END
\$\$;
SQL
}

# start_nodes N [LINE...]: N servers named 0 .. N-1 (start_node with the
# LINEs, on the first free ports from HILO_NODE_PORT), hilo created in each;
# stopped and removed at exit. on K runs psql on node K, conninfo K is its
# connection string.
start_nodes() {
    local n=$1 k
    shift
    trap stop_nodes EXIT
    log "starting $n nodes"
    for k in $(seq 0 $((n - 1))); do
        start_node "$k" "$@"
        on_node "$k" -c 'CREATE EXTENSION hilo'
    done
}
on() { on_node "$@"; }
conninfo() { node_conninfo "$1"; }

# supplied_count PATTERN NODE...: how many (node, sequence whose name is
# LIKE PATTERN) have at least two open windows (the agent's
# min_open_windows => 2 met), over the NODEs named (on_node's names).
supplied_count() {
    local pattern=$1 total=0 k n
    shift
    for k in "$@"; do
        n=$(on_node "$k" -c "SELECT count(*) FROM (
              SELECT s.name FROM hilo.sequences s JOIN hilo.windows w USING (seq_id)
               WHERE s.name LIKE '$pattern' AND w.next_hi_value < w.window_end_value
               GROUP BY s.name HAVING count(*) >= 2) x")
        total=$((total + n))
    done
    echo "$total"
}
