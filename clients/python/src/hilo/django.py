"""hilo IDs for Django (3.2 and later) primary keys:

    # models.py
    from hilo.django import HiloBigAutoField

    class Order(models.Model):
        id = HiloBigAutoField(primary_key=True)          # sequence: the table's name
        # or HiloBigAutoField(primary_key=True, sequence="orders")

    # the migration that creates the table, before CreateModel:
    from hilo.django import CreateHiloSequence
    operations = [CreateHiloSequence("shop_order", block_size=1000), migrations.CreateModel(...)]

The column is `bigint DEFAULT hilo_nextval('shop_order')`: the server draws
each ID, and Django reads it back with RETURNING, so Model.objects.create()
and bulk_create() (one INSERT per batch) get hilo IDs, as does SQL written
by hand. Foreign keys to it are plain bigint.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from django.db import models
from django.db.migrations.operations.base import Operation

__all__ = ["CreateHiloSequence", "HiloBigAutoField"]


def _literal(seq: str) -> str:
    return "'" + seq.replace("'", "''") + "'"


class HiloBigAutoField(models.BigAutoField):
    """A BigAutoField whose DEFAULT calls hilo_nextval(sequence) in place
    of a serial's sequence. sequence defaults to the model's table name."""

    description = "Big (8 byte) integer drawn from a hilo sequence"

    def __init__(self, *args: Any, sequence: Optional[str] = None, **kwargs: Any) -> None:
        self.sequence = sequence
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> Tuple[str, str, List[Any], Dict[str, Any]]:
        name, path, args, kwargs = super().deconstruct()
        if self.sequence is not None:
            kwargs["sequence"] = self.sequence
        return name, path, args, kwargs

    def sequence_name(self) -> str:
        return self.sequence or self.model._meta.db_table

    def db_type(self, connection: Any) -> str:
        if connection.vendor != "postgresql":
            raise NotImplementedError("HiloBigAutoField needs PostgreSQL with the hilo extension")
        return "bigint DEFAULT hilo_nextval(%s)" % _literal(self.sequence_name())

    def rel_db_type(self, connection: Any) -> str:
        return "bigint"  # a foreign key to it is a plain bigint


class CreateHiloSequence(Operation):
    """Migration operation: SELECT hilo_create(name, **settings) forwards
    (settings are hilo_create's: block_size=..., start_value=...), and
    hilo_drop(name) backwards. Put it before the CreateModel whose
    HiloBigAutoField names the sequence (a reverse migration then drops the
    table first, as hilo_drop wants)."""

    reversible = True
    reduces_to_sql = True

    def __init__(self, name: str, **settings: int) -> None:
        self.name = name
        self.settings = settings

    def deconstruct(self) -> Tuple[str, List[Any], Dict[str, Any]]:
        return self.__class__.__name__, [self.name], dict(self.settings)

    def state_forwards(self, app_label: str, state: Any) -> None:
        pass  # nothing in Django's model state

    def database_forwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        args = "".join(", %s => %d" % (k, int(v)) for k, v in self.settings.items())
        schema_editor.execute("SELECT hilo_create(%s%s)" % (_literal(self.name), args))

    def database_backwards(self, app_label: str, schema_editor: Any, from_state: Any, to_state: Any) -> None:
        if schema_editor.connection.vendor != "postgresql":
            return
        schema_editor.execute("SELECT hilo_drop(%s)" % _literal(self.name))

    def describe(self) -> str:
        return "Create hilo sequence %s" % self.name

    @property
    def migration_name_fragment(self) -> str:
        return "create_hilo_%s" % self.name.lower()
