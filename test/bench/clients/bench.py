"""One round of the Python client benchmark (test/bench/clients.sh).

Prints one line: python <driver> next_ns rt_ns idset8_ids_per_s rt8_ids_per_s
  next_ns        IdSet.next() per call, one thread
  rt_ns          SELECT hilo_nextval(...) per call (a round trip), one thread
  idset8         IDs per second, 8 threads sharing one IdSet
  rt8            IDs per second, 8 threads, each its own connection, a round trip per ID
"""

import os
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python", "src"))
import hilo  # noqa: E402

driver = sys.argv[1]
SEQ = os.environ.get("HILO_BENCH_SEQ", "bench_clients")
N_NEXT = int(os.environ.get("HILO_BENCH_PY_NEXT", "1000000"))
N_RT = int(os.environ.get("HILO_BENCH_PY_RT", "2000"))
BATCH = 100000

if driver == "psycopg":
    import psycopg

    def connect():
        c = psycopg.connect("")
        c.autocommit = True
        return c
else:
    import psycopg2

    def connect():
        c = psycopg2.connect("")
        c.autocommit = True
        return c


def in_threads(n, fn):
    barrier = threading.Barrier(n + 1)

    def run():
        barrier.wait()
        fn()

    ts = [threading.Thread(target=run) for _ in range(n)]
    for t in ts:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in ts:
        t.join()
    return time.perf_counter() - t0


# IdSet.next(), one thread.
ids = hilo.IdSet(connect, SEQ, batch_size=BATCH)
for _ in range(10000):
    ids.next()
nxt = ids.next
t0 = time.perf_counter()
for _ in range(N_NEXT):
    nxt()
next_ns = (time.perf_counter() - t0) / N_NEXT * 1e9

# A round trip per ID, one thread.
c = connect()
for _ in range(100):
    hilo.nextval(c, SEQ)
t0 = time.perf_counter()
for _ in range(N_RT):
    hilo.nextval(c, SEQ)
rt_ns = (time.perf_counter() - t0) / N_RT * 1e9
c.close()

# 8 threads sharing the IdSet.
per = N_NEXT // 8


def drain():
    for _ in range(per):
        nxt()


idset8 = 8 * per / in_threads(8, drain)
ids.close()

# 8 threads, a connection and a round trip per ID each.
conns = [connect() for _ in range(8)]
it = iter(conns)
lock = threading.Lock()
per_rt = N_RT // 8


def rt():
    with lock:
        cc = next(it)
    for _ in range(per_rt):
        hilo.nextval(cc, SEQ)


rt8 = 8 * per_rt / in_threads(8, rt)
for cc in conns:
    cc.close()
print("python-%s %.1f %.1f %.0f %.0f" % (driver, next_ns, rt_ns, idset8, rt8))
