"""Django (Debian's 3.2): HiloBigAutoField and CreateHiloSequence, through
a real migration: Model.objects.create() and bulk_create() get hilo IDs."""

import os

import pytest

django = pytest.importorskip("django")
from django.conf import settings  # noqa: E402

import hilo  # noqa: E402
from conftest import sqlstate  # noqa: E402

if not settings.configured:
    # Empty HOST, PORT and USER: libpq reads PGHOST, PGPORT and PGUSER.
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": os.environ.get("PGDATABASE", "postgres")}},
        INSTALLED_APPS=["djangoapp"],
        USE_TZ=True,
    )
    django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402

from djangoapp.models import Line, Order  # noqa: E402


@pytest.fixture
def migrated(pgconn):
    call_command("migrate", "djangoapp", verbosity=0)
    yield
    call_command("migrate", "djangoapp", "zero", verbosity=0)
    connection.close()


def test_create_and_bulk_create_get_hilo_ids(migrated, pgconn):
    # The column's DEFAULT calls hilo_nextval (no serial), a foreign key is bigint.
    rows = pgconn.execute(
        "SELECT attrelid::regclass::text, attname, format_type(atttypid, atttypmod), pg_get_expr(adbin, adrelid)"
        " FROM pg_attribute LEFT JOIN pg_attrdef ON adrelid = attrelid AND adnum = attnum"
        " WHERE attrelid IN ('djangoapp_order'::regclass, 'djangoapp_line'::regclass)"
        " AND attname IN ('id', 'order_id') ORDER BY 1, 2"
    ).fetchall()
    assert rows == [
        ("djangoapp_line", "id", "bigint", "hilo_nextval('djangoapp_lines'::text)"),
        ("djangoapp_line", "order_id", "bigint", None),
        ("djangoapp_order", "id", "bigint", "hilo_nextval('djangoapp_order'::text)"),
    ]
    o = Order.objects.create(note="one")
    assert isinstance(o.id, int) and o.id >= 1000000  # the sequence starts there
    assert Order.objects.get(pk=o.pk).note == "one"
    orders = Order.objects.bulk_create([Order(note="b%d" % i) for i in range(500)])
    got = [x.id for x in orders]
    assert all(i is not None and i >= 1000000 for i in got) and len(set(got + [o.id])) == 501
    lines = Line.objects.bulk_create([Line(order=o) for _ in range(10)])
    assert all(x.id >= 5000000 for x in lines)
    assert Line.objects.filter(order=o).count() == 10
    # They came from hilo: it hands none of them out again.
    taken = hilo.take(pgconn, "djangoapp_order", 1)[0][0]
    assert taken not in got and taken != o.id


def test_migrating_back_drops_the_sequence(pgconn):
    call_command("migrate", "djangoapp", verbosity=0)
    call_command("migrate", "djangoapp", "zero", verbosity=0)
    connection.close()
    with pytest.raises(Exception) as e:
        hilo.take(pgconn, "djangoapp_order", 1)
    assert sqlstate(e.value) == "42704"
