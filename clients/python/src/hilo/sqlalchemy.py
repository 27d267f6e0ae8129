"""hilo IDs for SQLAlchemy (1.4 and 2.0) primary keys, two ways:

    from sqlalchemy import BigInteger, Column
    import hilo, hilo.sqlalchemy as hs

    class Order(Base):                 # the server draws each ID
        __tablename__ = "orders"
        id = Column(BigInteger, primary_key=True, server_default=hs.nextval("orders"))

    ids = hilo.IdSet(engine.raw_connection, "items", batch_size=10000)

    class Item(Base):                  # the application draws them from an IdSet
        __tablename__ = "items"
        id = Column(BigInteger, primary_key=True, default=hs.IdSetDefault(ids))

With server_default, the table's DEFAULT calls hilo_nextval (every writer,
SQL included, gets a hilo ID) and the ORM reads each ID back with
RETURNING. With IdSetDefault, each row's ID comes from the IdSet as the
INSERT is built (no round trip), so session.add_all() of many rows becomes
a few multi-row INSERTs; Core's insert() with a list of rows likewise.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event, text

from ._client import IdSet

__all__ = ["IdSetDefault", "nextval", "create_sequence"]


def _literal(seq: str) -> str:
    return "'" + seq.replace("'", "''") + "'"


def nextval(seq: str) -> Any:
    """A server_default (or any SQL expression) calling hilo_nextval(seq)."""
    return text("hilo_nextval(%s)" % _literal(seq))


def create_sequence(target: Any, seq: str, **settings: int) -> None:
    """Creates the hilo sequence seq when metadata.create_all() creates
    target (a Table, or a mapped class's __table__), before the table
    (whose DEFAULT names it), and drops it after drop_all() drops the table.
    settings are hilo_create's (block_size=..., window_size=...)."""
    table = getattr(target, "__table__", target)
    args = "".join(", %s => %d" % (k, int(v)) for k, v in settings.items())

    @event.listens_for(table, "before_create")
    def _create(tbl: Any, connection: Any, **kw: Any) -> None:
        connection.execute(text("SELECT hilo_create(%s%s)" % (_literal(seq), args)))

    @event.listens_for(table, "after_drop")
    def _drop(tbl: Any, connection: Any, **kw: Any) -> None:
        connection.execute(text("SELECT hilo_drop(%s)" % _literal(seq)))


class IdSetDefault:
    """A client-side column default drawing from an IdSet: Column(...,
    default=IdSetDefault(ids)). SQLAlchemy calls it once per row as it
    builds the INSERT's parameters, in the ORM's flush as in Core's insert()
    with a list of rows: the rows go in multi-row INSERTs (psycopg2's
    execute_values, 1,000 rows a page), with no round trip per row."""

    def __init__(self, ids: IdSet) -> None:
        self.ids = ids

    def __call__(self, context: Any) -> int:  # one positional: SQLAlchemy passes its context
        return self.ids.next()
