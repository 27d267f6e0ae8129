#!/usr/bin/env bash
# The client libraries' IdSet against a round trip per ID, in Python (over
# psycopg 3 and psycopg2), Node.js (node-postgres) and Java (JDBC):
#   - per call, one thread: IdSet.next() vs SELECT hilo_nextval(...) from the
#     same client (the same driver, the same server);
#   - IDs per second from 8 threads (Python, Java) or 8 async callers
#     (Node.js) sharing one IdSet, vs 8 threads/callers each on its own
#     connection doing a round trip per ID.
# Each round runs every client once, in an order that rotates from round to
# round, so that the machine's drift hits all alike. Writes the medians,
# the spread and the ratios to docs/bench/clients.md. Target: IdSet gives
# at least 100 times the IDs per second of a round trip per ID.
#
#   test/bench/clients.sh [rounds]     (default 5)
source "$(dirname "$0")/lib.sh"
ROUNDS=${1:-5}

ensure_packages
ensure_client_packages
make -C "$HILO_ROOT" -s -j"$(nproc)"
make_pg_dir DIR bench-clients
install_private "$DIR/pg"
PORT=$(free_port 54440)
trap 'stop_cluster "$DIR"; cleanup_dirs' EXIT
start_client_cluster "$DIR" "$PORT"
as_pg "$PG_BIN/psql" -h "$DIR" -p "$PORT" -d postgres -X -q -c "SELECT hilo_create('bench_clients')" >/dev/null

(cd "$HILO_ROOT/clients/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
"$HILO_ROOT/clients/java/build.sh" >/dev/null
JDBC=/usr/share/java/postgresql.jar
JCP=$DIR/bench-classes
mkdir -p "$JCP"
javac -d "$JCP" -cp "$HILO_ROOT/clients/java/build/classes" "$HILO_ROOT/test/bench/clients/Bench.java"

BENCH=$HILO_ROOT/test/bench/clients
run_client() {
    case "$1" in
    psycopg | psycopg2) PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 "$BENCH/bench.py" "$1" ;;
    node) NODE_PATH=$HILO_ROOT/clients/node/node_modules node "$BENCH/bench.js" ;;
    java) java -cp "$JCP:$HILO_ROOT/clients/java/build/classes:$JDBC" Bench ;;
    esac
}

LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
CLIENTS=(psycopg psycopg2 node java)
RESULTS=$DIR/results.txt
: >"$RESULTS"
for ((r = 1; r <= ROUNDS; r++)); do
    for ((i = 0; i < ${#CLIENTS[@]}; i++)); do
        c=${CLIENTS[$(((i + r - 1) % ${#CLIENTS[@]}))]}
        line=$(run_client "$c")
        echo "round $r: $line"
        echo "$r $line" >>"$RESULTS"
    done
done

LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
PGVER=$(as_pg "$PG_BIN/psql" -h "$DIR" -p "$PORT" -d postgres -X -A -t -c "SELECT version()" | sed 's/ on .*//')
/usr/bin/python3 - "$RESULTS" "$ROUNDS" "$PGVER" "$(date -u +%F)" "$LOAD_BEFORE" "$LOAD_AFTER" >"$DOC" <<'PY'
import statistics, sys, subprocess
path, rounds, pgver, day, load0, load1 = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
rows = {}
for line in open(path):
    r, name, next_ns, rt_ns, idset8, rt8 = line.split()
    rows.setdefault(name, []).append((float(next_ns), float(rt_ns), float(idset8), float(rt8)))

def fmt(xs, f):
    return "%s (%s – %s)" % (f(statistics.median(xs)), f(min(xs)), f(max(xs)))

ns = lambda x: "%.0f ns" % x if x >= 100 else "%.1f ns" % x
us = lambda x: "%.0f µs" % (x / 1000)
rate = lambda x: "{:,.0f}".format(x)
ratio = lambda x: "{:,.0f}×".format(x)
names = {"python-psycopg": "Python, psycopg 3", "python-psycopg2": "Python, psycopg2",
         "node": "Node.js, node-postgres", "java": "Java, JDBC"}
node_v = subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip()
java_v = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
py_v = sys.version.split()[0]
print("# Client libraries: IdSet against a round trip per ID\n")
print("Produced by `test/bench/clients.sh %d` on %s: %s, 2 cores shared with" % (rounds, day, pgver))
print("other work (load average %s before the run, %s after: the spread" % (load0, load1))
print("shows how noisy). Python %s (Debian's psycopg 3 and" % py_v)
print("psycopg2), Node.js %s (node-postgres from npm), %s (Debian's" % (node_v, java_v.replace('"', "")))
print("PostgreSQL JDBC driver). Python and Node.js talk to the server over its Unix")
print("socket, Java over TCP on 127.0.0.1. Each round runs every client once, in")
print("an order that rotates from round to round. Median of the rounds, and in")
print("parentheses the lowest and highest.\n")
print("- **next()**: `IdSet.next()` per call, one thread, batches of 100,000 IDs")
print("  (Java 1,000,000) taken in the background.")
print("- **round trip**: `SELECT hilo_nextval(...)` per call from the same client.")
print("- **IdSet, 8**: IDs per second from 8 threads (Node.js: 8 async callers) sharing")
print("  one IdSet, background refills included.")
print("- **round trips, 8**: IDs per second from 8 threads (Node.js: 8 async callers),")
print("  each on its own connection, one `hilo_nextval` round trip per ID.")
print("- Ratios are taken within each round, then the median over the rounds.\n")
print("| client | next() | round trip | per-call ratio | IdSet, 8 (IDs/s) | round trips, 8 (IDs/s) | throughput ratio |")
print("|---|---|---|---|---|---|---|")
worst = None
for key in ["python-psycopg", "python-psycopg2", "node", "java"]:
    v = rows.get(key)
    if not v:
        continue
    nx, rt, i8, r8 = zip(*v)
    pc = [b / a for a, b in zip(nx, rt)]
    tr = [a / b for a, b in zip(i8, r8)]
    med = statistics.median(tr)
    worst = med if worst is None else min(worst, med)
    print("| %s | %s | %s | %s | %s | %s | %s |" % (
        names[key], fmt(nx, ns), fmt(rt, us), fmt(pc, ratio), fmt(i8, rate), fmt(r8, rate), fmt(tr, ratio)))
print()
print("Target: at least 100 times the IDs per second of a round trip per ID. Lowest")
print("median throughput ratio in this run: %s (%s)." % (ratio(worst), "met" if worst >= 100 else "MISSED"))
print()
print("Rounds, as measured (client, next() ns, round trip ns, IdSet 8 IDs/s, round trips 8 IDs/s):\n")
print("```")
for line in open(path):
    print(line.rstrip())
print("```")
PY
cat "$DOC"
