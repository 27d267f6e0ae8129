#!/usr/bin/env bash
# In-server latency of hilo_take for n = 1 .. 10^12, default settings.
# Calls are interleaved (one of each n per round) so drift hits all alike;
# each is timed with clock_timestamp() inside the server. Prints the median
# per n and the ratio between n = 10^12 and n = 10^9, and writes the table to
# docs/bench/take_latency.md.
#
#   test/bench/take_latency.sh [rounds]     (default 300)
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-300}

ensure_packages
bench_server 54340
psql_bench() { as_pg "$PG_BIN/psql" -h "$DIR" -p "$PORT" -d postgres -X -q -v ON_ERROR_STOP=1 "$@"; }

psql_bench <<SQL
CREATE EXTENSION hilo;
SELECT hilo_create('bench') \g /dev/null
SELECT count(*) FROM hilo_take_ranges('bench', 1) \g /dev/null
$(take_latency_sql bench "$ROUNDS")
SQL

REPORT=$(psql_bench -P footer=off <<'SQL'
\pset format aligned
SELECT n, count(*) AS calls,
       round(percentile_cont(0.5) WITHIN GROUP (ORDER BY us)::numeric, 1) AS median_us,
       round(percentile_cont(0.9) WITHIN GROUP (ORDER BY us)::numeric, 1) AS p90_us
  FROM latency GROUP BY n ORDER BY n;
SELECT round((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY us) FROM latency
               WHERE n = 1000000000000)::numeric /
             (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY us) FROM latency
               WHERE n = 1000000000)::numeric, 3) AS "median ratio n=10^12 / n=10^9";
SQL
)
echo "$REPORT"

mkdir -p "$HILO_ROOT/docs/bench"
{
    echo "# hilo_take latency by n"
    echo
    echo "Produced by \`test/bench/take_latency.sh $ROUNDS\` on $(date -u +%Y-%m-%d), PostgreSQL"
    echo "$($PG_BIN/postgres --version | sed 's/.*) //'), $(nproc) cores. In-server time of one call,"
    echo "every call a reservation committed (WAL flushed) by the allocator."
    echo
    echo '```'
    echo "$REPORT"
    echo '```'
} >"$HILO_ROOT/docs/bench/take_latency.md"
echo "written to docs/bench/take_latency.md"
