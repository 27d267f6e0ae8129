"""Client for the hilo PostgreSQL extension.

Works over a psycopg 3 or a psycopg2 connection alike:

    import hilo
    hilo.take(conn, "orders", 10)          # [(1, 10)]
    hilo.push(conn, "orders", [(3, 5)])    # 3
    hilo.nextval(conn, "orders")           # 11

    with hilo.IdSet(connect, "orders", batch_size=10000) as ids:
        order_id = ids.next()              # no round trip

    async with hilo.AsyncIdSet(apool, "orders") as ids:   # asyncio
        order_id = await ids.next()

A psycopg_pool (or psycopg2.pool) pool may stand wherever a connection
does: each call borrows a connection and gives it back. The asynchronous
calls are in hilo.aio; SQLAlchemy's and Django's in hilo.sqlalchemy and
hilo.django.

Ranges are inclusive (first, last) pairs of Python ints, both ways; nobody
parses '{[1,11)}'. Errors are the driver's own exceptions (psycopg.Error or
psycopg2.Error, with the server's SQLSTATE).
"""

from ._client import IdSet, IdSetClosed, Range, count, nextval, push, take
from ._version import __version__
from .aio import AsyncIdSet

__all__ = ["AsyncIdSet", "IdSet", "IdSetClosed", "Range", "count", "nextval", "push", "take", "__version__"]
