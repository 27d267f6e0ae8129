"""IdSet: uniqueness across threads, background refill, push-back on close
and at exit, a crash leaves only a gap, errors are the driver's."""

import itertools
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import hilo
from conftest import DSN, assert_free, free_ids, sqlstate

SRC = os.path.join(os.path.dirname(__file__), "..", "src")
_apps = itertools.count()


def wait_for(cond, what, timeout=60):
    """Waits for an event (not a speed check: the limit is generous)."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail("timed out waiting for " + what)
        time.sleep(0.01)


def test_unique_across_threads_and_pushed_back_on_close(connect, conn, seq):
    ids = hilo.IdSet(connect, seq, batch_size=50, low_water=20)
    per_thread = 1500
    got = [[] for _ in range(8)]
    start = threading.Barrier(8)

    def worker(out):
        start.wait()
        for _ in range(per_thread):
            out.append(ids.next())

    threads = [threading.Thread(target=worker, args=(out,)) for out in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    handed = [i for out in got for i in out]
    assert len(handed) == 8 * per_thread
    assert len(set(handed)) == len(handed), "an ID was handed out twice"
    for out in got:  # each thread sees its IDs in increasing order
        assert out == sorted(out)
    assert ids.refills > 0
    # The last next() calls started a refill; once it lands, none is under way.
    wait_for(lambda: ids.remaining >= ids.low_water, "the last refill")
    held = ids.ranges()
    assert hilo.count(held) == ids.remaining > 0
    assert not set(handed) & {i for a, b in held for i in range(a, b + 1)}
    ids.close()
    assert ids.remaining == 0
    assert_free(conn, seq, held)
    with pytest.raises(hilo.IdSetClosed):
        ids.next()
    ids.close()  # idempotent


def test_refills_in_the_background_before_running_dry(connect, seq):
    with hilo.IdSet(connect, seq, batch_size=100, low_water=50) as ids:
        assert ids.remaining == 100 and ids.refills == 0
        for _ in range(51):
            ids.next()
        # No further next(): the refill thread alone brings the next batch.
        wait_for(lambda: ids.refills == 1, "the background refill")
        assert ids.remaining == 149
        assert len(ids.ranges()) >= 1


def test_next_waits_for_a_refill_when_dry(connect, seq):
    # low_water 0: no refill until the set is dry; next() then waits for one.
    with hilo.IdSet(connect, seq, batch_size=10, low_water=0) as ids:
        got = [ids.next() for _ in range(35)]
        assert len(set(got)) == 35
        assert ids.refills >= 3


def test_unknown_sequence_raises_driver_error_from_constructor(connect, errors):
    with pytest.raises(errors.UndefinedObject) as e:
        hilo.IdSet(connect, "no_such_seq")
    assert sqlstate(e.value) == "42704"


def test_refill_error_surfaces_from_next_when_dry(connect, conn, seq, errors):
    ids = hilo.IdSet(connect, seq, batch_size=10, low_water=0)
    with conn.cursor() as cur:
        cur.execute("SELECT hilo_drop(%s)", (seq,))
    got = [ids.next() for _ in range(10)]  # the batch held still serves
    assert len(set(got)) == 10
    with pytest.raises(errors.UndefinedObject):
        ids.next()
    with pytest.raises(errors.UndefinedObject):  # the next call retried: same error
        ids.next()
    with pytest.raises(hilo.IdSetClosed):
        ids.close()
        ids.next()


def test_given_connection_is_used_and_left_open(connect, conn, seq):
    c = connect()  # not autocommit: the IdSet commits its own calls
    try:
        ids = hilo.IdSet(c, seq, batch_size=10)
        a = ids.next()
        ids.close()
        assert_free(conn, seq, [(a + 1, a + 9)])
        assert hilo.nextval(c, seq) > 0  # still open, usable
        c.commit()
    finally:
        c.close()


CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    sys.path.insert(0, os.environ["HILO_SRC"])
    import hilo
    if os.environ["DRIVER"] == "psycopg":
        import psycopg as drv
    else:
        import psycopg2 as drv
    # low_water 0: no refill before the set runs dry, so it holds exactly the 97 IDs
    # left of its one batch when it prints them (with the default, a background
    # refill could land first).
    ids = hilo.IdSet(lambda: drv.connect(os.environ["DSN"]), os.environ["SEQ"], batch_size=100,
                     low_water=0)
    handed = [ids.next() for _ in range(3)]
    print(json.dumps({"handed": handed, "held": ids.ranges()}), flush=True)
    if os.environ.get("HANG"):
        time.sleep(600)
    # else: exit without close(); atexit pushes back
    """
)


def run_child(driver, seq, hang=False):
    env = dict(os.environ, HILO_SRC=SRC, DRIVER=driver, DSN=DSN, SEQ=seq)
    if hang:
        env["HANG"] = "1"
    return subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, text=True)


def test_process_exit_pushes_back(driver, conn, seq):
    p = run_child(driver, seq)
    out = json.loads(p.stdout.readline())
    assert p.wait(timeout=120) == 0
    held = [tuple(r) for r in out["held"]]
    assert hilo.count(held) == 97
    assert_free(conn, seq, held)
    assert free_ids(conn, seq, [(i, i) for i in out["handed"]]) == 0


def test_crash_leaves_only_a_gap(driver, conn, seq):
    p = run_child(driver, seq, hang=True)
    out = json.loads(p.stdout.readline())
    os.kill(p.pid, signal.SIGKILL)
    p.wait(timeout=120)
    held = [tuple(r) for r in out["held"]]
    assert free_ids(conn, seq, held) == 0  # nothing pushed back ...
    child = set(out["handed"]) | {i for a, b in held for i in range(a, b + 1)}
    later = hilo.take(conn, seq, 5000)
    later_ids = {i for a, b in later for i in range(a, b + 1)}
    assert not child & later_ids  # ... and none of it ever handed out again


# -- close() racing next() and a refill --


class Gate:
    """Holds up the next take of a GatedConnection: while armed, a take sets
    entered and waits for release before it runs. Forces a refill to be under
    way at a chosen moment, with events instead of sleeps."""

    def __init__(self):
        self.armed = False
        self.entered = threading.Event()
        self.release = threading.Event()
        self.taken = []  # what the held-up take returned


class GatedCursor:
    def __init__(self, cur, gate):
        self._cur = cur
        self._gate = gate
        self._held_up = False

    def __enter__(self):
        self._cur.__enter__()
        return self

    def __exit__(self, *exc):
        return self._cur.__exit__(*exc)

    def __getattr__(self, name):
        return getattr(self._cur, name)

    def execute(self, sql, params=None):
        if self._gate.armed and "hilo_take_ranges" in sql:
            self._gate.armed = False
            self._gate.entered.set()
            assert self._gate.release.wait(60), "the test never released the take"
            self._held_up = True
        return self._cur.execute(sql, params)

    def fetchall(self):
        rows = self._cur.fetchall()
        if self._held_up:
            self._gate.taken.extend((int(a), int(b)) for a, b in rows)
        return rows


class GatedConnection:
    """A driver connection whose takes go through a Gate; everything else is
    the connection's own."""

    def __init__(self, conn, gate):
        object.__setattr__(self, "_conn", conn)
        object.__setattr__(self, "_gate", gate)

    def __getattr__(self, name):
        return getattr(self._conn, name)

    def __setattr__(self, name, value):
        setattr(self._conn, name, value)

    def cursor(self):
        return GatedCursor(self._conn.cursor(), self._gate)


def handed_out_again(conn, seq, handed):
    """The IDs of handed that hilo holds as free (pushed back after they were
    handed out): each is pushed once more, which hilo refuses with 22023 if it
    is free already and accepts (harmless at the end of a test) if not."""
    free = []
    for i in handed:
        try:
            hilo.push(conn, seq, [(i, i)])
        except Exception as e:
            assert sqlstate(e) == "22023", e
            free.append(i)
    return free


def close_during_held_refill(ids, gate):
    """Starts close() in a thread while the refill under way is held up,
    waits until close() has begun (it then waits for that refill), and
    returns the thread."""
    assert gate.entered.wait(60), "no refill started"
    closer = threading.Thread(target=ids.close)
    closer.start()
    wait_for(lambda: ids._closed, "close() to begin")
    return closer


def next_or_none(ids):
    try:
        return ids.next()
    except hilo.IdSetClosed:
        return None


def test_next_during_close_hands_out_nothing(connect, conn, seq):
    gate = Gate()
    ids = hilo.IdSet(lambda: GatedConnection(connect(), gate), seq, batch_size=10, low_water=5)
    handed = [ids.next() for _ in range(5)]
    gate.armed = True
    handed.append(ids.next())  # 4 left, under low_water: a refill starts and is held up
    closer = close_during_held_refill(ids, gate)
    during = next_or_none(ids)  # close() is waiting for the refill
    gate.release.set()
    closer.join()
    after = [next_or_none(ids) for _ in range(3)]
    got = [i for i in [during] + after if i is not None]
    again = handed_out_again(conn, seq, handed + got)
    assert not again, "IDs handed out and pushed back by close(): %s" % again
    assert during is None, "next() during close() handed out %d" % during
    assert got == [], "next() after close() handed out %s" % got


def test_refill_landing_during_close_is_pushed_not_handed_out(connect, conn, seq):
    gate = Gate()
    ids = hilo.IdSet(lambda: GatedConnection(connect(), gate), seq, batch_size=10, low_water=5)
    handed = [ids.next() for _ in range(5)]
    gate.armed = True
    handed += [ids.next() for _ in range(5)]  # the first asks for a refill (held up); now dry
    closer = close_during_held_refill(ids, gate)
    gate.release.set()  # the refill lands while close() waits for it
    closer.join()
    after = [next_or_none(ids) for _ in range(3)]
    got = [i for i in after if i is not None]
    again = handed_out_again(conn, seq, handed + got)
    assert not again, "IDs handed out after close() pushed them back: %s" % again
    assert got == []
    assert ids.remaining == 0
    assert gate.taken and hilo.count(gate.taken) == 10
    assert_free(conn, seq, gate.taken)  # close() pushed the refill back


# -- fork() --


def in_forked_child(body):
    """Runs body(emit) in a child made by os.fork(); emit(obj) sends obj to
    the parent as a JSON line. Returns (pid, a reader of those lines). The
    child always ends with os._exit, never returning into pytest."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            out = os.fdopen(w, "w")

            def emit(obj):
                out.write(json.dumps(obj) + "\n")
                out.flush()

            try:
                body(emit)
                emit({"done": True})
            except BaseException as e:
                emit({"error": type(e).__name__, "message": str(e)})
        finally:
            os._exit(0)
    os.close(w)
    return pid, LineReader(r)


class LineReader:
    """JSON lines from a pipe, each waited for at most timeout seconds (a
    child that hangs fails the test instead of hanging it)."""

    def __init__(self, fd):
        self.fd = fd
        self.buf = b""

    def __call__(self, timeout=60):
        while b"\n" not in self.buf:
            ready, _, _ = select.select([self.fd], [], [], timeout)
            if not ready:
                pytest.fail("the forked child printed nothing for %d s: it hangs" % timeout)
            chunk = os.read(self.fd, 65536)
            assert chunk, "the forked child exited early"
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def close(self):
        os.close(self.fd)


def reap(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    os.waitpid(pid, 0)


def test_forked_child_starts_afresh_with_a_connection_factory(connect, conn, seq):
    ids = hilo.IdSet(connect, seq, batch_size=10, low_water=0)
    mine = {ids.next() for _ in range(2)}
    mine |= {i for a, b in ids.ranges() for i in range(a, b + 1)}

    def child(emit):
        for _ in range(15):  # past the child's first batch: its refills work
            emit({"id": ids.next()})
        ids.close()  # what atexit does in the child: pushes back only its own IDs

    pid, lines = in_forked_child(child)
    try:
        got = []
        while True:
            msg = lines()
            if "id" not in msg:
                break
            assert msg["id"] not in mine, "the child handed out the parent's ID %d" % msg["id"]
            got.append(msg["id"])
        assert msg == {"done": True}, msg
    finally:
        reap(pid)
        lines.close()
    assert len(set(got)) == 15
    # The parent's set is untouched: same IDs, same connection (the child
    # neither used nor closed it), and close() pushes them back itself.
    v = ids.next()
    assert v in mine and v not in got
    held = ids.ranges()
    ids.close()
    assert_free(conn, seq, held)


def test_forked_child_refuses_a_set_on_a_given_connection(connect, conn, seq):
    c = connect()
    try:
        ids = hilo.IdSet(c, seq, batch_size=10, low_water=0)
        mine = {ids.next()}
        mine |= {i for a, b in ids.ranges() for i in range(a, b + 1)}

        def child(emit):
            try:
                emit({"id": ids.next()})
            except hilo.IdSetClosed as e:
                emit({"closed": str(e)})
            ids.close()  # pushes nothing, leaves the parent's connection alone

        pid, lines = in_forked_child(child)
        try:
            msg = lines()
            assert "id" not in msg or msg["id"] not in mine, "the child handed out the parent's ID %d" % msg["id"]
            assert "closed" in msg, msg
            assert "fork" in msg["closed"] and "each process" in msg["closed"], msg["closed"]
            assert lines() == {"done": True}
        finally:
            reap(pid)
            lines.close()
        assert ids.next() in mine
        held = ids.ranges()
        ids.close()
        assert_free(conn, seq, held)
    finally:
        c.close()


# -- a lost connection --


def terminate_backend(conn, app):
    """Ends the server session of the connection named app (as a server
    restart or failover would) and waits until it is gone."""
    with conn.cursor() as cur:
        cur.execute(
            "SELECT pg_terminate_backend(pid, 60000) FROM pg_stat_activity WHERE application_name = %s", (app,)
        )
        assert [r[0] for r in cur.fetchall()] == [True]


def named_connect(driver, app):
    if driver == "psycopg":
        import psycopg

        return lambda: psycopg.connect(DSN, application_name=app)
    import psycopg2

    return lambda: psycopg2.connect(DSN, application_name=app)


def test_refill_reconnects_after_the_connection_was_lost(driver, conn, seq):
    app = "hilo_test_%d_%d" % (os.getpid(), next(_apps))
    ids = hilo.IdSet(named_connect(driver, app), seq, batch_size=10, low_water=0)
    got = [ids.next() for _ in range(10)]  # dry now
    terminate_backend(conn, app)
    got += [ids.next() for _ in range(25)]  # refills on a new connection
    assert len(set(got)) == 35, "an ID was handed out twice"
    held = ids.ranges()
    ids.close()
    assert_free(conn, seq, held)


def test_close_pushes_back_on_a_new_connection_after_the_old_was_lost(driver, conn, seq):
    app = "hilo_test_%d_%d" % (os.getpid(), next(_apps))
    ids = hilo.IdSet(named_connect(driver, app), seq, batch_size=10, low_water=0)
    a = ids.next()
    held = ids.ranges()
    terminate_backend(conn, app)
    ids.close()  # the push on the old connection never ran: it goes on a new one
    assert_free(conn, seq, held)
    assert free_ids(conn, seq, [(a, a)]) == 0
