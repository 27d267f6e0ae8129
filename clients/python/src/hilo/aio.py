"""The asynchronous API, over psycopg 3's AsyncConnection or psycopg_pool's
AsyncConnectionPool (FastAPI, aiohttp, any asyncio service):

    import hilo.aio
    await hilo.aio.take(aconn, "orders", 10)         # [(1, 10)]
    await hilo.aio.push(aconn, "orders", [(3, 5)])   # 3
    await hilo.aio.nextval(apool, "orders")          # 11

    async with hilo.AsyncIdSet(apool, "orders", batch_size=10000) as ids:
        order_id = await ids.next()                  # no round trip

A pool lends a connection for each call, which commits and goes back.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import operator
from typing import Any, AsyncIterator, Awaitable, Callable, Deque, Iterable, List, Optional, Union

from ._client import _NEXTVAL, _PUSH, _TAKE, IdSetClosed, Range, _bounds, _broken, _is_pool, count

__all__ = ["AsyncIdSet", "nextval", "push", "take"]


async def _arollback(conn: Any) -> None:
    try:
        await conn.rollback()
    except Exception:
        pass


@contextlib.asynccontextmanager
async def _borrowed(conn_or_pool: Any) -> AsyncIterator[Any]:
    """The connection itself, or one borrowed from an AsyncConnectionPool
    for the call (committed, or rolled back on error, and given back)."""
    if not _is_pool(conn_or_pool):
        yield conn_or_pool
        return
    async with conn_or_pool.connection() as conn:
        yield conn


async def take(conn: Any, seq: str, n: int, partial: bool = False) -> List[Range]:
    """hilo.take on an AsyncConnection or AsyncConnectionPool."""
    n = operator.index(n)
    async with _borrowed(conn) as c, c.cursor() as cur:
        await cur.execute(_TAKE, (seq, n, bool(partial)))
        return [(int(first), int(last)) for first, last in await cur.fetchall()]


async def push(conn: Any, seq: str, ranges: Iterable[Range]) -> int:
    """hilo.push on an AsyncConnection or AsyncConnectionPool."""
    firsts, lasts = _bounds(ranges)
    async with _borrowed(conn) as c, c.cursor() as cur:
        await cur.execute(_PUSH, (seq, firsts, lasts))
        row = await cur.fetchone()
        return int(row[0])


async def nextval(conn: Any, seq: str) -> int:
    """One ID: SELECT hilo_nextval(seq), one round trip."""
    async with _borrowed(conn) as c, c.cursor() as cur:
        await cur.execute(_NEXTVAL, (seq,))
        row = await cur.fetchone()
        return int(row[0])


ConnectionSource = Union[Any, Callable[[], Awaitable[Any]]]


class AsyncIdSet:
    """IdSet for asyncio: IDs of one sequence taken in batches and handed
    out by ``await ids.next()`` without a round trip.

    AsyncIdSet(conn, seq, batch_size=1000, low_water=None)

    conn is an AsyncConnection that the set uses alone and commits on, an
    AsyncConnectionPool (each take and push borrows a connection, commits
    and gives it back), or an async function of no arguments returning a
    connection, which the set opens and closes itself. The first batch is
    taken by the first next() (or on entering ``async with``): an unknown
    sequence raises there. Whenever fewer than low_water IDs (default:
    batch_size) are left, a task on the event loop takes the next batch
    while next() goes on handing out the current one; next() waits only
    if the set ran dry first. A failed refill raises the driver's error
    from next() once the set is dry, and the next call tries again. On a
    pool or a function, a take on a connection found lost (SQLSTATE class
    08, 57P01..57P03, or closed) is retried once on another.

    One event loop: use it from the loop's tasks (any number of them), not
    from threads. ``await close()`` (or leaving ``async with``) pushes back
    every ID not handed out; a set never closed leaves its IDs as a gap,
    never a duplicate (at interpreter exit the event loop is gone, so
    nothing is pushed back then: close it in the application's shutdown).
    """

    def __init__(
        self, conn: ConnectionSource, seq: str, batch_size: int = 1000, low_water: Optional[int] = None
    ) -> None:
        batch_size = operator.index(batch_size)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        low_water = batch_size if low_water is None else operator.index(low_water)
        if low_water < 0:
            raise ValueError("low_water must not be negative")
        self.seq = seq
        self.batch_size = batch_size
        self.low_water = low_water
        self._pool = conn if _is_pool(conn) else None
        self._factory = conn if callable(conn) and self._pool is None else None
        self._conn = None if (self._pool is not None or self._factory is not None) else conn
        self._next = 1  # current range: _next .. _last
        self._last = 0
        self._ranges: Deque[Range] = collections.deque()
        self._later = 0
        self._refill: Optional[asyncio.Task] = None  # the take under way
        self._error: Optional[BaseException] = None
        self._closed = False
        self._refills = 0

    # -- handing out --

    async def next(self) -> int:
        """The next ID. Raises IdSetClosed after close(), or the driver's
        error if the set ran dry and its refill failed."""
        while True:
            if self._closed:
                raise IdSetClosed("AsyncIdSet for %r is closed" % (self.seq,))
            v = self._next
            if v <= self._last:
                self._next = v + 1
                if self._refill is None and self._error is None and self._held_count() < self.low_water:
                    self._start_refill()
                return v
            if self._ranges:
                first, last = self._ranges.popleft()
                self._later -= last - first + 1
                self._next, self._last = first, last
                continue
            if self._error is not None:
                err, self._error = self._error, None
                raise err
            if self._refill is None:
                self._start_refill()
            assert self._refill is not None
            await asyncio.shield(self._refill)  # a cancelled next() leaves the take running

    def __aiter__(self) -> "AsyncIdSet":
        return self

    async def __anext__(self) -> int:
        return await self.next()

    @property
    def remaining(self) -> int:
        """IDs held and not yet handed out."""
        return self._held_count()

    @property
    def refills(self) -> int:
        """Batches taken so far (the first one included)."""
        return self._refills

    def ranges(self) -> List[Range]:
        """The IDs held and not yet handed out, as inclusive ranges."""
        held = [(self._next, self._last)] if self._next <= self._last else []
        held.extend(self._ranges)
        return held

    async def close(self) -> None:
        """Waits for a refill under way, then pushes back every ID not
        handed out (and closes a connection it opened itself). Idempotent.
        Raises the driver's error if the push failed (those IDs are then a
        gap)."""
        if self._closed:
            return
        self._closed = True
        if self._refill is not None:
            try:
                await asyncio.shield(self._refill)
            except BaseException:
                pass
        held = self.ranges()
        self._ranges.clear()
        self._later = 0
        self._next, self._last = 1, 0
        try:
            if held:
                await self._push(held)
        finally:
            if self._factory is not None and self._conn is not None:
                conn, self._conn = self._conn, None
                await conn.close()

    async def __aenter__(self) -> "AsyncIdSet":
        if self._held_count() == 0:  # the first batch now: an unknown sequence raises here
            await self._refill_now()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- refills --

    def _held_count(self) -> int:
        return (self._last - self._next + 1 if self._next <= self._last else 0) + self._later

    def _start_refill(self) -> None:
        self._refill = asyncio.get_running_loop().create_task(self._refill_now())

    async def _refill_now(self) -> None:
        try:
            ranges = await self._take()
        except BaseException as e:
            if isinstance(e, Exception):
                self._error = e
            if self._refill is None:  # called directly (__aenter__): the caller gets it
                self._error = None
                raise
            return
        finally:
            self._refill = None
        self._ranges.extend(ranges)
        self._later += count(ranges)
        self._refills += 1

    async def _connection(self) -> Any:
        if self._conn is None:
            self._conn = await self._factory()  # type: ignore[misc]
        return self._conn

    async def _take(self) -> List[Range]:
        for retry in (False, True):
            if self._pool is not None:
                try:
                    return await take(self._pool, self.seq, self.batch_size)
                except Exception as e:
                    if retry or not _broken_pool_error(e):
                        raise
                continue
            conn = await self._connection()
            try:
                ranges = await take(conn, self.seq, self.batch_size)
                await conn.commit()
                return ranges
            except BaseException as e:
                await _arollback(conn)
                if self._factory is None or retry or not (isinstance(e, Exception) and _broken(conn, e)):
                    raise
                self._conn = None
                try:
                    await conn.close()
                except Exception:
                    pass
        raise AssertionError("unreachable")

    async def _push(self, held: List[Range]) -> None:
        if self._pool is not None:
            await push(self._pool, self.seq, held)  # the pool's connection commits on its way back
            return
        conn = await self._connection()
        try:
            await push(conn, self.seq, held)
            await conn.commit()
        except BaseException:
            await _arollback(conn)
            raise


def _broken_pool_error(exc: BaseException) -> bool:
    """Whether a call on a pool's connection failed because the connection
    was lost (the pool drops such a connection when it comes back)."""
    code = getattr(exc, "sqlstate", None)
    if code and (code.startswith("08") or code in ("57P01", "57P02", "57P03")):
        return True
    return type(exc).__name__ == "OperationalError"
