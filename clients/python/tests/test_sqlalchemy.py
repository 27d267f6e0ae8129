"""SQLAlchemy (Debian's 1.4): a primary key whose DEFAULT calls
hilo_nextval, and one drawn from an IdSet in the application, through the
ORM (session.add_all of 100,000 rows in a few statements) and Core."""

import uuid

import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.orm import Session, declarative_base

import hilo
import hilo.sqlalchemy as hs
from conftest import DSN, new_seq


@pytest.fixture
def engine():
    # psycopg2: the driver SQLAlchemy 1.4 knows; libpq reads PGHOST etc.
    e = sa.create_engine("postgresql+psycopg2://", connect_args={"dsn": DSN} if DSN else {})
    yield e
    e.dispose()


def count_statements(engine):
    counter = {"n": 0}

    @event.listens_for(engine, "before_cursor_execute")
    def _count(conn, cursor, statement, parameters, context, executemany):
        if statement.lstrip().upper().startswith("INSERT"):
            counter["n"] += 1

    return counter


def test_server_default_calls_hilo_nextval(engine, pgconn):
    Base = declarative_base()
    name = "sa_orders_" + uuid.uuid4().hex[:8]

    class Order(Base):
        __tablename__ = name
        id = sa.Column(sa.BigInteger, primary_key=True, server_default=hs.nextval(name))
        note = sa.Column(sa.Text)

    hs.create_sequence(Order, name, block_size=100)
    Base.metadata.create_all(engine)
    try:
        # The DEFAULT is in the table: SQL of its own gets hilo IDs as well.
        default = pgconn.execute(
            "SELECT pg_get_expr(adbin, adrelid) FROM pg_attrdef WHERE adrelid = %s::regclass", (name,)
        ).fetchone()[0]
        assert default == "hilo_nextval('%s'::text)" % name
        with Session(engine, expire_on_commit=False) as s:
            orders = [Order(note="n%d" % i) for i in range(250)]
            s.add_all(orders)
            s.commit()
            got = [o.id for o in orders]
        assert len(set(got)) == 250 and all(isinstance(i, int) for i in got)
        taken = hilo.take(pgconn, name, 1)[0][0]
        assert max(got) < taken  # they came from the sequence
    finally:
        Base.metadata.drop_all(engine)
    with pytest.raises(Exception) as e:  # drop_all dropped the sequence after the table
        hilo.take(pgconn, name, 1)
    assert getattr(e.value, "sqlstate", None) == "42704"


def test_idset_default_bulk_add_all_without_a_round_trip_per_row(engine, pgconn):
    Base = declarative_base()
    name = "sa_items_" + uuid.uuid4().hex[:8]
    seq = new_seq(pgconn, "sa", window_size=1000000, block_size=10000)
    ids = hilo.IdSet(engine.raw_connection, seq, batch_size=10000)

    class Item(Base):
        __tablename__ = name
        id = sa.Column(sa.BigInteger, primary_key=True, default=hs.IdSetDefault(ids))
        note = sa.Column(sa.Text)

    Base.metadata.create_all(engine)
    inserts = count_statements(engine)
    try:
        with Session(engine, expire_on_commit=False) as s:
            items = [Item(note="x") for _ in range(100000)]
            s.add_all(items)
            s.commit()
            got = [i.id for i in items]
        assert len(set(got)) == 100000
        # A few multi-row INSERTs, not one per row (psycopg2's execute_values
        # pages of 1,000 rows at most, as SQLAlchemy runs them).
        assert inserts["n"] <= 200, inserts["n"]
        # Core: a list of rows, the default called once per row.
        with engine.begin() as c:
            c.execute(sa.insert(Item.__table__), [{"note": "core"} for _ in range(1000)])
            core = [r[0] for r in c.execute(sa.text('SELECT id FROM "%s" WHERE note = \'core\'' % name))]
        assert len(core) == 1000 and not set(core) & set(got)
        ids.close()
        # Every ID came from the IdSet: the sequence hands out none of them again.
        after = hilo.take(pgconn, seq, 1000)
        taken = {i for a, b in after for i in range(a, b + 1)}
        assert not taken & (set(got) | set(core))
    finally:
        ids.close()
        Base.metadata.drop_all(engine)
