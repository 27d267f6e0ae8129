"""take / push / nextval and the IdSet, over psycopg 3 or psycopg2.

Both drivers take the same SQL with %s placeholders; the statements name
every parameter's type, so neither driver's guess about Python ints or
lists matters. Only hilo_take_ranges and hilo_push_ranges are used: plain
bigint columns and bigint[] arrays, which every driver maps to ints.

Wherever a connection goes, a pool may go instead: psycopg_pool's
ConnectionPool, or psycopg2.pool's pools (anything with getconn and
putconn). A call then borrows a connection, commits, and gives it back.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import operator
import os
import threading
import weakref
from typing import Any, Deque, Iterable, Iterator, List, Optional, Tuple

#: An inclusive range of IDs, (first, last).
Range = Tuple[int, int]

_TAKE = "SELECT first_id, last_id FROM hilo_take_ranges(%s::text, %s::bigint, %s::boolean)"
_PUSH = "SELECT hilo_push_ranges(%s::text, %s::bigint[], %s::bigint[])"
_NEXTVAL = "SELECT hilo_nextval(%s::text)"


def _is_pool(obj: Any) -> bool:
    """A connection pool (psycopg_pool or psycopg2.pool): getconn/putconn."""
    return hasattr(obj, "getconn") and hasattr(obj, "putconn")


def _is_async(obj: Any) -> bool:
    """psycopg's AsyncConnection or psycopg_pool's AsyncConnectionPool."""
    return any(c.__name__.startswith("Async") and c.__module__.startswith(("psycopg", "psycopg_pool"))
               for c in type(obj).__mro__)


def _putconn(pool: Any, conn: Any, broken: bool = False) -> None:
    if broken and type(pool).__module__.startswith("psycopg2"):
        pool.putconn(conn, close=True)  # psycopg2's pools keep what they are given
    else:
        pool.putconn(conn)  # psycopg_pool drops a broken connection itself


@contextlib.contextmanager
def _borrowed(conn_or_pool: Any) -> Iterator[Any]:
    """The connection itself, or one borrowed from a pool for the call:
    committed (rolled back on error) and given back."""
    if _is_async(conn_or_pool):
        raise TypeError("%s is asynchronous: use hilo.aio (await hilo.aio.take(...)) or hilo.AsyncIdSet"
                        % type(conn_or_pool).__name__)
    if not _is_pool(conn_or_pool):
        yield conn_or_pool
        return
    pool = conn_or_pool
    conn = pool.getconn()
    broken = False
    try:
        yield conn
        conn.commit()
    except BaseException as e:
        _rollback(conn)
        broken = isinstance(e, Exception) and _broken(conn, e)
        raise
    finally:
        _putconn(pool, conn, broken)


def take(conn: Any, seq: str, n: int, partial: bool = False) -> List[Range]:
    """Reserves n IDs of sequence seq; returns [(first, last), ...], inclusive.

    With partial=True, as many as remain (at least one). Runs in the
    connection's current transaction, but the IDs are reserved for good
    whether it commits or not (hilo never hands them out again). conn may
    be a pool: a connection is borrowed for the call."""
    n = operator.index(n)
    with _borrowed(conn) as c, c.cursor() as cur:
        cur.execute(_TAKE, (seq, n, bool(partial)))
        return [(int(first), int(last)) for first, last in cur.fetchall()]


def _bounds(ranges: Iterable[Range]) -> Tuple[List[int], List[int]]:
    firsts, lasts = [], []
    for r in ranges:
        first, last = r  # a pair, or TypeError/ValueError
        firsts.append(operator.index(first))
        lasts.append(operator.index(last))
    return firsts, lasts


def push(conn: Any, seq: str, ranges: Iterable[Range]) -> int:
    """Gives unused IDs back: ranges is an iterable of inclusive (first, last)
    pairs. Returns how many IDs went back. Like any write, it counts only once
    the connection's transaction commits (autocommit, or conn.commit()); on
    a pool, the borrowed connection commits before it goes back."""
    firsts, lasts = _bounds(ranges)
    with _borrowed(conn) as c, c.cursor() as cur:
        cur.execute(_PUSH, (seq, firsts, lasts))
        return int(cur.fetchone()[0])


def nextval(conn: Any, seq: str) -> int:
    """One ID: SELECT hilo_nextval(seq), one round trip."""
    with _borrowed(conn) as c, c.cursor() as cur:
        cur.execute(_NEXTVAL, (seq,))
        return int(cur.fetchone()[0])


def _rollback(conn: Any) -> None:
    """Rolls back after a failed call; a broken connection may refuse even
    that, and the caller's exception is the one that matters."""
    try:
        conn.rollback()
    except Exception:
        pass


def _sqlstate(exc: BaseException) -> Optional[str]:
    """SQLSTATE of a psycopg (sqlstate) or psycopg2 (pgcode) error, or None."""
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


def _broken(conn: Any, exc: BaseException) -> bool:
    """Whether exc says that conn is lost (server restart, failover, killed
    session): SQLSTATE class 08, 57P01..57P03, or a driver that marks the
    connection closed or broken."""
    code = _sqlstate(exc)
    if code and (code.startswith("08") or code in ("57P01", "57P02", "57P03")):
        return True
    try:
        return bool(conn.closed) or bool(getattr(conn, "broken", False))
    except Exception:
        return True


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:
        pass


def _detach(conn: Any) -> None:
    """In a child made by fork(): points the copied connection's socket at
    /dev/null, so that nothing the child does with it (closing it, or the
    driver's finalizer saying goodbye to the server) reaches the parent's
    session on the same socket."""
    try:
        fd = conn.fileno()
    except Exception:  # closed already
        return
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def count(ranges: Iterable[Range]) -> int:
    """How many IDs a list of inclusive ranges holds."""
    return sum(last - first + 1 for first, last in ranges)


_NEVER = 1 << 64  # above every ID


class IdSetClosed(Exception):
    """next() on an IdSet after close(), or on the copy of an IdSet on a
    given connection that a child process got from fork()."""


def _close_at_exit(ref: "weakref.ReferenceType[IdSet]") -> None:
    ids = ref()
    if ids is not None:
        try:
            ids.close()
        except Exception:  # the interpreter is going away: a gap, not a crash
            pass


# Every IdSet not yet closed, for the fork() hook below.
_live: "weakref.WeakSet[IdSet]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for ids in list(_live):
        ids._forked()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class IdSet:
    """IDs of one hilo sequence, taken in batches and handed out in the process.

    IdSet(conn, seq, batch_size=1000, low_water=None)

    conn is a connection (psycopg 3 or psycopg2) that the IdSet uses alone
    and commits on, a function of no arguments returning one, which the
    IdSet then opens and closes itself, or a pool (psycopg_pool's
    ConnectionPool, psycopg2.pool's): each take and push then borrows a
    connection, commits and gives it back, and a lost one is retried on
    another (as with a function). The first batch is taken in the
    constructor (so an unknown sequence raises there). Whenever fewer than
    low_water IDs (default: batch_size) are left, a background thread takes
    the next batch of batch_size while next() goes on handing out the
    current one. next() waits only if the set ran dry before the refill came
    back; a failed refill raises the driver's exception from next() once the
    set is dry, and the call after that tries again. A set that opened its
    connection with the function opens a new one when it finds it lost
    (server restart, failover: SQLSTATE class 08, 57P01..57P03, or closed):
    a take is retried at once on the new connection; close()'s push too,
    but only if it certainly did not commit (else those IDs are a gap). A
    set on a given connection leaves that to its owner.

    Thread safe. close() (also on `with` exit and at interpreter exit, by
    atexit) pushes back every ID not handed out. If the process dies
    instead, the IDs it held are never handed out again: a gap, no
    duplicate.

    One process: a child made by fork() (multiprocessing, gunicorn
    --preload) never hands out or pushes back its parent's IDs, nor touches
    its parent's connection. With a connection function, the child's copy
    starts afresh, empty, with a connection and refill thread of its own
    (from its first next()); on a given connection it raises IdSetClosed.
    """

    def __init__(self, conn: Any, seq: str, batch_size: int = 1000, low_water: Optional[int] = None) -> None:
        batch_size = operator.index(batch_size)
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        low_water = batch_size if low_water is None else operator.index(low_water)
        if low_water < 0:
            raise ValueError("low_water must not be negative")
        self.seq = seq
        self.batch_size = batch_size
        self.low_water = low_water
        if _is_async(conn):
            raise TypeError("%s is asynchronous: use hilo.AsyncIdSet" % type(conn).__name__)
        self._pool = conn if _is_pool(conn) else None
        self._factory = conn if callable(conn) and self._pool is None else None
        self._owns_conn = self._factory is not None
        # The connection (None with a pool); None once a lost one was closed
        # (the next use opens a new one). Used by the refill thread, or by
        # close() after it.
        self._conn = self._factory() if self._owns_conn else (None if self._pool is not None else conn)
        self._pid = os.getpid()  # the process whose IDs these are
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._next = 1  # current range: _next .. _last
        self._last = 0
        self._ranges: Deque[Range] = collections.deque()  # later ranges, in order
        self._later = 0  # IDs in _ranges
        # next() asks for a refill once it hands out an ID >= _trigger: the
        # first one that leaves fewer than low_water. _NEVER while a refill
        # is under way or its error waits for a dry next().
        self._trigger = _NEVER
        self._refilling = False
        self._error = None
        self._closed = False
        self._why_closed = None  # IdSetClosed's message, if not the usual one
        self._refills = 0
        self._thread = None
        try:
            self._add(self._take())
            self._set_trigger()
        except BaseException:
            if self._owns_conn and self._conn is not None:
                _close_quietly(self._conn)
            raise
        self._start_thread()
        self._exit_hook = lambda ref=weakref.ref(self): _close_at_exit(ref)
        atexit.register(self._exit_hook)
        _live.add(self)

    # -- the calling threads' side --

    def next(self) -> int:
        """The next ID (an int). Raises IdSetClosed after close(), or the
        driver's exception if the set ran dry and its refill failed."""
        with self._lock:
            if self._closed:  # nothing is handed out once close() began
                raise IdSetClosed(self._closed_message())
            v = self._next
            if v <= self._last:
                self._next = v + 1
                if v >= self._trigger:
                    self._ask_refill()
                return v
            while True:
                if self._closed:
                    raise IdSetClosed(self._closed_message())
                if self._pid != os.getpid():  # a fork without the hook
                    raise IdSetClosed(self._fork_message())
                if self._ranges:
                    self._next, self._last = self._ranges.popleft()
                    self._later -= self._last - self._next + 1
                    self._set_trigger()  # IDs need not rise from range to range
                    v = self._next
                    self._next = v + 1
                    if v >= self._trigger:
                        self._ask_refill()
                    return v
                if self._error is not None:
                    err, self._error = self._error, None
                    self._set_trigger()
                    raise err
                if not self._refilling:
                    self._ask_refill()
                self._cond.wait()

    __next__ = next

    def __iter__(self) -> "IdSet":
        return self

    @property
    def remaining(self) -> int:
        """IDs held and not yet handed out."""
        with self._lock:
            return self._held_count()

    @property
    def refills(self) -> int:
        """Batches taken in the background so far."""
        with self._lock:
            return self._refills

    def ranges(self) -> List[Range]:
        """The IDs held and not yet handed out, as inclusive ranges."""
        with self._lock:
            return self._held()

    def close(self) -> None:
        """Stops the refills and pushes back every ID not handed out.
        Idempotent. Raises the driver's exception if the push failed (those
        IDs are then a gap)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True  # next() hands out nothing from now on
            self._trigger = _NEVER
            self._cond.notify_all()
        _live.discard(self)
        atexit.unregister(self._exit_hook)
        copied = self._pid != os.getpid()  # by a fork that ran no hooks
        if self._thread is not None and not copied:  # (a copied thread is not there to join)
            self._thread.join()  # a refill under way lands in _ranges first
        with self._lock:
            held = self._held()
            self._ranges.clear()
            self._later = 0
            self._next, self._last = 1, 0
        if copied:
            return  # the IDs and the connection are the parent's
        try:
            if held:
                self._push(held)
        finally:
            if self._owns_conn and self._conn is not None:
                self._conn.close()

    def __enter__(self) -> "IdSet":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- the refill thread's side --

    def _held(self) -> List[Range]:
        held = [(self._next, self._last)] if self._next <= self._last else []
        held.extend(self._ranges)
        return held

    def _connection(self) -> Any:
        """The connection; a new one from the function if the last was lost;
        one borrowed from the pool (given back by _release)."""
        if self._pool is not None:
            return self._pool.getconn()
        if self._conn is None:
            self._conn = self._factory()
        return self._conn

    def _lost(self, conn: Any, exc: BaseException) -> bool:
        """After a failed call on conn: whether conn was lost and was one of
        our own (then it is closed, and the next use opens a new one)."""
        if not ((self._owns_conn or self._pool is not None) and isinstance(exc, Exception) and _broken(conn, exc)):
            return False
        if self._pool is not None:
            return True  # _release gives it back as broken
        _close_quietly(conn)
        self._conn = None
        return True

    def _take(self) -> List[Range]:
        """A batch; on a connection of our own found lost, retried once on a
        new one (a take that may have gone through is only a gap)."""
        for retry in (False, True):
            conn = self._connection()
            lost = False
            try:
                ranges = take(conn, self.seq, self.batch_size)
                conn.commit()
                return ranges
            except BaseException as e:
                _rollback(conn)
                lost = self._lost(conn, e)
                if not lost or retry:
                    raise
            finally:
                self._release(conn, lost)
        raise AssertionError("unreachable")

    def _release(self, conn: Any, lost: bool) -> None:
        """Gives a connection borrowed from the pool back."""
        if self._pool is not None:
            _putconn(self._pool, conn, lost)

    def _push(self, held: List[Range]) -> None:
        """Pushes held back and commits. On a connection of our own found
        lost, once more on a new one, but only if the first push certainly
        did not commit: it ran in a transaction whose COMMIT was not sent
        (a push that may have committed is never repeated)."""
        for retry in (False, True):
            conn = self._connection()
            may_have_committed = False
            lost = False
            try:
                if self._owns_conn and conn.autocommit:
                    conn.autocommit = False  # our own: COMMIT is then ours to send
                may_have_committed = bool(conn.autocommit)
                push(conn, self.seq, held)
                may_have_committed = True
                conn.commit()
                return
            except BaseException as e:
                _rollback(conn)
                lost = self._lost(conn, e)
                if may_have_committed or not lost or retry:
                    raise
            finally:
                self._release(conn, lost)

    def _closed_message(self) -> str:
        return self._why_closed or "IdSet for %r is closed" % (self.seq,)

    def _fork_message(self) -> str:
        return (
            "IdSet for %r was opened in process %d and copied into process %d by fork(): its IDs and its "
            "connection are that process's; each process needs its own IdSet (open it after the fork, or "
            "give IdSet a function that opens a connection, and a child's copy starts afresh)"
            % (self.seq, self._pid, os.getpid())
        )

    def _forked(self) -> None:
        """In a child made by fork(), before anything else runs there: the
        copy gives up the parent's IDs (a gap, never a duplicate) and its
        connection, whose socket the parent still uses. With a connection
        function it starts afresh: the first next() opens a connection and a
        refill thread of its own. On a given connection it is closed."""
        self._lock = threading.Lock()  # the parent's may have been held by a thread the child lacks
        self._cond = threading.Condition(self._lock)
        self._thread = None
        if self._owns_conn and self._conn is not None:
            _detach(self._conn)
            self._conn = None
        if self._closed:  # closing in the parent: nothing left to do here
            return
        self._next, self._last = 1, 0
        self._ranges.clear()
        self._later = 0
        self._refilling = False
        self._error = None
        self._refills = 0
        self._trigger = _NEVER
        if self._owns_conn:
            self._pid = os.getpid()
        else:  # the caller's connection: not ours to use or close here
            self._why_closed = self._fork_message()
            self._closed = True
            _live.discard(self)
            atexit.unregister(self._exit_hook)

    def _held_count(self) -> int:
        return (self._last - self._next + 1 if self._next <= self._last else 0) + self._later

    def _set_trigger(self) -> None:
        """After the IDs held changed: hand out the ID that leaves fewer
        than low_water, and next() asks for a refill."""
        if self._refilling or self._error is not None or self._closed:
            self._trigger = _NEVER
        elif self._next <= self._last:
            # After handing out v, (_last - v) + _later remain.
            self._trigger = self._last + self._later - self.low_water + 1
        else:
            self._trigger = _NEVER if self._ranges else -_NEVER

    def _ask_refill(self) -> None:
        self._refilling = True
        self._trigger = _NEVER
        if self._thread is None:  # a child of fork() starts its own
            self._start_thread()
        self._cond.notify_all()

    def _start_thread(self) -> None:
        self._thread = threading.Thread(target=self._run, name="hilo-idset-" + str(self.seq), daemon=True)
        self._thread.start()

    def _add(self, ranges: List[Range]) -> None:
        self._ranges.extend(ranges)
        self._later += count(ranges)
        if self._next > self._last and self._ranges:  # make the first current
            self._next, self._last = self._ranges.popleft()
            self._later -= self._last - self._next + 1

    def _run(self) -> None:
        while True:
            with self._lock:
                while not (self._refilling or self._closed):
                    self._cond.wait()
                if self._closed:
                    return
            try:
                ranges = self._take()
            except Exception as e:
                with self._lock:
                    self._error = e
                    self._refilling = False
                    self._set_trigger()
                    self._cond.notify_all()
                continue
            with self._lock:
                self._add(ranges)
                self._refills += 1
                self._refilling = False
                self._set_trigger()
                self._cond.notify_all()
