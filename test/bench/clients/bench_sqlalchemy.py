"""One round of the SQLAlchemy rows benchmark (test/bench/clients.sh):
HILO_BENCH_ROWS (100,000) rows by session.add_all and commit, the IDs from
an IdSet (hilo.sqlalchemy.IdSetDefault) and from the server's DEFAULT
hilo_nextval (hilo.sqlalchemy.nextval). Prints one line:
sqlalchemy idset_rows_per_s default_rows_per_s"""

import os
import sys
import time
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "clients", "python", "src"))
import psycopg  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from sqlalchemy.orm import Session, declarative_base  # noqa: E402

import hilo  # noqa: E402
import hilo.sqlalchemy as hs  # noqa: E402

ROWS = int(os.environ.get("HILO_BENCH_ROWS", "100000"))
engine = sa.create_engine("postgresql+psycopg2://")
Base = declarative_base()
tag = uuid.uuid4().hex[:8]
seq_ids, seq_default = "bench_sa_ids_" + tag, "bench_sa_default_" + tag
with psycopg.connect("", autocommit=True) as c:
    for s in (seq_ids, seq_default):
        c.execute("SELECT hilo_create(%s, block_size => 10000)", (s,))
ids = hilo.IdSet(lambda: psycopg.connect(""), seq_ids, batch_size=10000)


class WithIdSet(Base):
    __tablename__ = "bench_sa_idset_" + tag
    id = sa.Column(sa.BigInteger, primary_key=True, default=hs.IdSetDefault(ids))
    note = sa.Column(sa.Text)


class WithDefault(Base):
    __tablename__ = "bench_sa_default_" + tag
    id = sa.Column(sa.BigInteger, primary_key=True, server_default=hs.nextval(seq_default))
    note = sa.Column(sa.Text)


Base.metadata.create_all(engine)


def rows_per_s(model):
    objs = [model(note="x") for _ in range(ROWS)]
    t0 = time.perf_counter()
    with Session(engine, expire_on_commit=False) as s:
        s.add_all(objs)
        s.commit()
    return ROWS / (time.perf_counter() - t0)


try:
    idset = rows_per_s(WithIdSet)
    default = rows_per_s(WithDefault)
finally:
    ids.close()
    Base.metadata.drop_all(engine)
print("sqlalchemy %.0f %.0f" % (idset, default))
