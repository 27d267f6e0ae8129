"""One round of the asyncio client benchmark (test/bench/clients.sh), on
psycopg 3's AsyncConnection. Prints one line, as bench.py does:
python-asyncio next_ns rt_ns idset8_ids_per_s rt8_ids_per_s
  next_ns        await AsyncIdSet.next() per call, one task
  rt_ns          await hilo.aio.nextval(...) per call (a round trip), one task
  idset8         IDs per second, 8 tasks sharing one AsyncIdSet
  rt8            IDs per second, 8 tasks, each its own connection, a round trip per ID
"""

import asyncio
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python", "src"))
import psycopg  # noqa: E402

import hilo  # noqa: E402
import hilo.aio  # noqa: E402

SEQ = os.environ.get("HILO_BENCH_SEQ", "bench_clients")
N_NEXT = int(os.environ.get("HILO_BENCH_PY_NEXT", "1000000"))
N_RT = int(os.environ.get("HILO_BENCH_PY_RT", "2000"))
BATCH = 100000


async def connect():
    return await psycopg.AsyncConnection.connect("", autocommit=True)


async def main():
    ids = hilo.AsyncIdSet(connect, SEQ, batch_size=BATCH)
    for _ in range(10000):
        await ids.next()
    nxt = ids.next
    t0 = time.perf_counter()
    for _ in range(N_NEXT):
        await nxt()
    next_ns = (time.perf_counter() - t0) / N_NEXT * 1e9

    c = await connect()
    for _ in range(100):
        await hilo.aio.nextval(c, SEQ)
    t0 = time.perf_counter()
    for _ in range(N_RT):
        await hilo.aio.nextval(c, SEQ)
    rt_ns = (time.perf_counter() - t0) / N_RT * 1e9
    await c.close()

    per = N_NEXT // 8

    async def drain():
        for _ in range(per):
            await nxt()

    t0 = time.perf_counter()
    await asyncio.gather(*(drain() for _ in range(8)))
    idset8 = 8 * per / (time.perf_counter() - t0)
    await ids.close()

    conns = [await connect() for _ in range(8)]
    per_rt = N_RT // 8

    async def rt(cc):
        for _ in range(per_rt):
            await hilo.aio.nextval(cc, SEQ)

    t0 = time.perf_counter()
    await asyncio.gather(*(rt(cc) for cc in conns))
    rt8 = 8 * per_rt / (time.perf_counter() - t0)
    for cc in conns:
        await cc.close()
    print("python-asyncio %.1f %.1f %.0f %.0f" % (next_ns, rt_ns, idset8, rt8))


asyncio.run(main())
