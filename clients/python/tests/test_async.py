"""The asynchronous API on psycopg 3's AsyncConnection and psycopg_pool's
AsyncConnectionPool, and the synchronous one on psycopg_pool's and
psycopg2.pool's pools: connections are given back, never closed."""

import asyncio
import time

import psycopg
import psycopg.errors
import pytest
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import hilo
import hilo.aio
from conftest import DSN, assert_free, sqlstate


def run(coro):
    return asyncio.run(coro)


def test_async_take_push_nextval_on_a_connection(pgconn, pgseq):
    async def main():
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as aconn:
            got = await hilo.aio.take(aconn, pgseq, 10)
            assert hilo.count(got) == 10 and all(isinstance(a, int) for r in got for a in r)
            first, last = got[0]
            assert await hilo.aio.push(aconn, pgseq, [(first, first + 2)]) == 3
            v = await hilo.aio.nextval(aconn, pgseq)
            assert isinstance(v, int) and not first + 3 <= v <= last
            with pytest.raises(psycopg.errors.UndefinedObject) as e:
                await hilo.aio.take(aconn, "no_such_seq", 1)
            assert sqlstate(e.value) == "42704"
            return first

    first = run(main())
    assert_free(pgconn, pgseq, [(first, first + 2)])


def test_sync_call_on_an_async_connection_says_what_to_use(pgseq):
    async def main():
        async with await psycopg.AsyncConnection.connect(DSN) as aconn:
            with pytest.raises(TypeError, match="hilo.aio"):
                hilo.take(aconn, pgseq, 1)
            with pytest.raises(TypeError, match="AsyncIdSet"):
                hilo.IdSet(aconn, pgseq)

    run(main())


def test_async_calls_on_a_pool_give_the_connection_back(pgconn, pgseq):
    async def main():
        async with AsyncConnectionPool(DSN, min_size=1, max_size=1, open=False) as pool:
            got = []
            for _ in range(5):  # one connection: each call must have given it back
                got += await asyncio.wait_for(hilo.aio.take(pool, pgseq, 3), 30)
            await asyncio.wait_for(hilo.aio.nextval(pool, pgseq), 30)
            first = got[0][0]
            assert await asyncio.wait_for(hilo.aio.push(pool, pgseq, [(first, first)]), 30) == 1
            assert pool.get_stats()["pool_size"] == 1
            return first, hilo.count(got)

    first, n = run(main())
    assert n == 15
    assert_free(pgconn, pgseq, [(first, first)])  # the pool's connection committed the push


@pytest.mark.parametrize("source", ["connection", "pool", "function"])
def test_async_idset_unique_across_tasks_and_pushed_back_on_close(pgconn, pgseq, source):
    async def main():
        aconn = pool = None
        if source == "connection":
            aconn = conn_or_pool = await psycopg.AsyncConnection.connect(DSN)
        elif source == "pool":
            pool = conn_or_pool = AsyncConnectionPool(DSN, min_size=1, max_size=1, open=False)
            await pool.open()
        else:
            conn_or_pool = lambda: psycopg.AsyncConnection.connect(DSN)  # noqa: E731
        try:
            ids = hilo.AsyncIdSet(conn_or_pool, pgseq, batch_size=50, low_water=20)

            async def worker():
                out = []
                for _ in range(500):
                    out.append(await ids.next())
                    if len(out) % 97 == 0:
                        await asyncio.sleep(0)  # let the others and the refill run
                return out

            got = await asyncio.wait_for(asyncio.gather(*[worker() for _ in range(8)]), 60)
            handed = [i for out in got for i in out]
            assert len(handed) == 4000 and len(set(handed)) == 4000, "an ID was handed out twice"
            assert ids.refills >= 4000 // 50
            for _ in range(600):  # the last next() calls started a refill: let it land
                if ids.remaining >= ids.low_water:
                    break
                await asyncio.sleep(0.05)
            held = ids.ranges()
            await ids.close()
            assert ids.remaining == 0
            with pytest.raises(hilo.IdSetClosed):
                await ids.next()
            await ids.close()  # idempotent
            if pool is not None:
                assert pool.get_stats()["pool_size"] == 1  # given back, not closed
                async with pool.connection() as c:  # and usable
                    await c.execute("SELECT 1")
            if aconn is not None:
                assert not aconn.closed  # the caller's: left open
            return held
        finally:
            if aconn is not None:
                await aconn.close()
            if pool is not None:
                await pool.close()

    held = run(main())
    assert held
    assert_free(pgconn, pgseq, held)


def test_async_idset_refills_in_the_background(pgseq):
    async def main():
        async with await psycopg.AsyncConnection.connect(DSN) as aconn:
            async with hilo.AsyncIdSet(aconn, pgseq, batch_size=100, low_water=50) as ids:
                assert ids.remaining == 100 and ids.refills == 1
                for _ in range(51):
                    await ids.next()
                for _ in range(600):  # no next(): the refill task alone brings the batch
                    if ids.refills == 2:
                        break
                    await asyncio.sleep(0.05)
                assert ids.refills == 2 and ids.remaining == 149

    run(main())


def test_async_idset_unknown_sequence_and_failed_refill(pgconn, pgseq):
    async def main():
        async with await psycopg.AsyncConnection.connect(DSN) as aconn:
            with pytest.raises(psycopg.errors.UndefinedObject):
                async with hilo.AsyncIdSet(aconn, "no_such_seq"):
                    pass
            ids = hilo.AsyncIdSet(aconn, pgseq, batch_size=10, low_water=0)
            got = [await ids.next()]
            pgconn.execute("SELECT hilo_drop(%s)", (pgseq,))
            got += [await ids.next() for _ in range(9)]  # the batch held still serves
            assert len(set(got)) == 10
            for _ in range(2):  # the next call tries again: the same error
                with pytest.raises(psycopg.errors.UndefinedObject):
                    await ids.next()
            await ids.close()

    run(main())


def test_async_idset_next_is_100_times_a_round_trip(pgseq):
    """Not a benchmark (docs/bench/clients.md is): a bound that holds on a
    loaded machine, where one round trip costs far more than next()."""

    async def main():
        async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as aconn:
            t = time.perf_counter()
            for _ in range(200):
                await hilo.aio.nextval(aconn, pgseq)
            per_trip = (time.perf_counter() - t) / 200
            async with hilo.AsyncIdSet(aconn, pgseq, batch_size=100000) as ids:
                t = time.perf_counter()
                for _ in range(20000):
                    await ids.next()
                per_next = (time.perf_counter() - t) / 20000
            return per_trip, per_next

    per_trip, per_next = run(main())
    assert per_next * 10 < per_trip, (per_trip, per_next)


@pytest.mark.parametrize("kind", ["psycopg_pool", "psycopg2.pool"])
def test_idset_and_calls_on_a_pool_give_connections_back(pgconn, pgseq, kind):
    if kind == "psycopg_pool":
        pool = ConnectionPool(DSN, min_size=1, max_size=1)
    else:
        import psycopg2.pool

        pool = psycopg2.pool.ThreadedConnectionPool(1, 1, DSN)
    try:
        assert hilo.count(hilo.take(pool, pgseq, 5)) == 5
        ids = hilo.IdSet(pool, pgseq, batch_size=10, low_water=0)
        got = [ids.next() for _ in range(35)]  # refills borrow the one connection again and again
        assert len(set(got)) == 35 and ids.refills >= 3
        held = ids.ranges()
        ids.close()
        assert_free(pgconn, pgseq, held)  # the borrowed connection committed the push
        v = hilo.nextval(pool, pgseq)  # the connection came back, open and usable
        assert v not in got
        if kind == "psycopg_pool":
            assert pool.get_stats()["pool_size"] == 1
            assert pool.get_stats().get("connections_lost", 0) == 0
    finally:
        if kind == "psycopg_pool":
            pool.close()
        else:
            pool.closeall()
