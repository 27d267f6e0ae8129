"""IdSet: uniqueness across threads, background refill, push-back on close
and at exit, a crash leaves only a gap, errors are the driver's."""

import json
import os
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
