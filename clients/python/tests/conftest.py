"""Fixtures: a real server named by HILO_TEST_DSN (libpq conninfo), with
hilo preloaded; every test runs once over psycopg 3 and once over psycopg2."""

import itertools
import os
import sys
import uuid

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

DSN = os.environ.get("HILO_TEST_DSN", "")  # empty: libpq reads PGHOST, PGPORT, ...


def connect_with(driver):
    if driver == "psycopg":
        import psycopg

        return lambda: psycopg.connect(DSN)
    import psycopg2

    return lambda: psycopg2.connect(DSN)


@pytest.fixture(params=["psycopg", "psycopg2"])
def driver(request):
    return request.param


@pytest.fixture
def connect(driver):
    return connect_with(driver)


@pytest.fixture
def errors(driver):
    """The driver's errors module (UndefinedObject is SQLSTATE 42704)."""
    if driver == "psycopg":
        import psycopg.errors

        return psycopg.errors
    import psycopg2.errors

    return psycopg2.errors


@pytest.fixture
def conn(connect):
    c = connect()
    c.autocommit = True
    with c.cursor() as cur:
        cur.execute("CREATE EXTENSION IF NOT EXISTS hilo")
    yield c
    c.close()


_counter = itertools.count()


@pytest.fixture
def seq(conn):
    """A new sequence with small blocks, so refills and pools turn over."""
    name = "py_%s_%d" % (uuid.uuid4().hex[:8], next(_counter))
    with conn.cursor() as cur:
        cur.execute("SELECT hilo_create(%s, window_size => 100000, block_size => 100)", (name,))
    return name


def sqlstate(exc):
    """SQLSTATE of a psycopg or psycopg2 error."""
    return getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)


def assert_free(conn, seq, ranges):
    """Checks that hilo holds every ID of ranges as free: pushed back and not
    handed out since. It may keep them in hilo.free_ranges or already have
    moved them into the sequence's pool (the allocator refills pools from
    the free list first), so the check asks hilo itself: pushing each range
    again must be refused with 22023 ('already free' or 'wait in a pool'),
    which changes nothing. A range that was not pushed back would be
    accepted here, and the check fails."""
    import hilo

    for first, last in ranges:
        try:
            hilo.push(conn, seq, [(first, last)])
        except Exception as e:
            assert sqlstate(e) == "22023", e
            assert "already free" in str(e) or "wait in a pool" in str(e), e
        else:
            raise AssertionError("IDs %d..%d were not pushed back" % (first, last))


def free_ids(conn, seq, ranges):
    """How many of the IDs in ranges hilo.free_ranges holds for seq."""
    total = 0
    with conn.cursor() as cur:
        for first, last in ranges:
            cur.execute(
                "SELECT coalesce(sum(least(f.last_id, %s) - greatest(f.first_id, %s) + 1), 0)"
                " FROM hilo.free_ranges f JOIN hilo.sequences s USING (seq_id)"
                " WHERE s.name = %s AND f.first_id <= %s AND f.last_id >= %s",
                (last, first, seq, last, first),
            )
            total += int(cur.fetchone()[0])
    return total


def new_seq(conn, prefix="py", **settings):
    """Creates a hilo sequence with a fresh name (small blocks by default)."""
    name = "%s_%s_%d" % (prefix, uuid.uuid4().hex[:8], next(_counter))
    settings.setdefault("window_size", 100000)
    settings.setdefault("block_size", 100)
    args = ", ".join("%s => %d" % (k, v) for k, v in settings.items())
    with conn.cursor() as cur:
        cur.execute("SELECT hilo_create(%s, " + args + ")", (name,))
    return name


@pytest.fixture
def pgconn():
    """A psycopg 3 connection in autocommit (for the tests of what only
    psycopg 3 has: the async API, psycopg_pool)."""
    import psycopg

    c = psycopg.connect(DSN, autocommit=True)
    c.execute("CREATE EXTENSION IF NOT EXISTS hilo")
    yield c
    c.close()


@pytest.fixture
def pgseq(pgconn):
    return new_seq(pgconn)
