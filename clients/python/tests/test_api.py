"""take / push / nextval over both drivers: typed ranges both ways."""

import pytest

import hilo
from conftest import assert_free, free_ids, sqlstate


def test_take_returns_inclusive_int_pairs(conn, seq):
    got = hilo.take(conn, seq, 10)
    assert got == [(1, 10)]
    assert all(type(a) is int and type(b) is int for a, b in got)
    more = hilo.take(conn, seq, 5)
    assert more == [(11, 15)]


def test_push_takes_pairs_and_ids_come_back(conn, seq):
    hilo.take(conn, seq, 20)
    assert hilo.push(conn, seq, [(3, 5), (8, 9)]) == 5
    assert_free(conn, seq, [(3, 5), (8, 9)])
    assert_free(conn, seq, [(3, 3), (9, 9)])


def test_push_accepts_any_iterable_of_pairs(conn, seq):
    hilo.take(conn, seq, 10)
    assert hilo.push(conn, seq, iter([[2, 2], (4, 6)])) == 4
    assert hilo.push(conn, seq, []) == 0


def test_bigint_range_round_trips(conn):
    import uuid

    name = "py_big_" + uuid.uuid4().hex[:8]
    start = 2**62 + 12345
    with conn.cursor() as cur:
        cur.execute("SELECT hilo_create(%s, start_value => %s)", (name, start))
    got = hilo.take(conn, name, 3)
    assert got == [(start, start + 2)]
    assert hilo.push(conn, name, [(start + 1, start + 2)]) == 2
    assert_free(conn, name, [(start + 1, start + 2)])


def test_partial_take(conn):
    import uuid

    name = "py_small_" + uuid.uuid4().hex[:8]
    with conn.cursor() as cur:
        cur.execute("SELECT hilo_create(%s, max_value => 7, window_size => 7, block_size => 1)", (name,))
    assert hilo.take(conn, name, 100, partial=True) == [(1, 7)]


def test_exhaustion_is_2200H(conn, errors):
    import uuid

    name = "py_small_" + uuid.uuid4().hex[:8]
    with conn.cursor() as cur:
        cur.execute("SELECT hilo_create(%s, max_value => 7, window_size => 7, block_size => 1)", (name,))
    with pytest.raises(errors.Error) as e:
        hilo.take(conn, name, 100)
    assert sqlstate(e.value) == "2200H"


def test_nextval_is_an_int_and_increases(conn, seq):
    a = hilo.nextval(conn, seq)
    b = hilo.nextval(conn, seq)
    assert type(a) is int and b > a


def test_unknown_sequence_raises_driver_error_42704(conn, errors):
    for call in (
        lambda: hilo.take(conn, "no_such_seq", 1),
        lambda: hilo.push(conn, "no_such_seq", [(1, 1)]),
        lambda: hilo.nextval(conn, "no_such_seq"),
    ):
        with pytest.raises(errors.UndefinedObject) as e:
            call()
        assert sqlstate(e.value) == "42704"


def test_bad_push_is_refused_whole(conn, seq, errors):
    hilo.take(conn, seq, 10)
    with pytest.raises(errors.Error) as e:
        hilo.push(conn, seq, [(2, 5), (4, 6)])  # overlapping
    assert sqlstate(e.value) == "22023"
    assert free_ids(conn, seq, [(1, 10)]) == 0
    with pytest.raises(TypeError):
        hilo.push(conn, seq, [(1, "2")])
    with pytest.raises((TypeError, ValueError)):
        hilo.push(conn, seq, [(1, 2, 3)])


def test_take_in_a_rolled_back_transaction_still_reserves(connect, seq):
    c = connect()  # not autocommit: take runs in the caller's transaction
    try:
        first = hilo.take(c, seq, 4)
        c.rollback()
        again = hilo.take(c, seq, 4)
        c.commit()
        assert not set(range(first[0][0], first[0][1] + 1)) & set(range(again[0][0], again[0][1] + 1))
    finally:
        c.close()


def test_count():
    assert hilo.count([(1, 10), (20, 20)]) == 11
