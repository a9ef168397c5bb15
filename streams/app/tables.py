"""Faust tables that hold fold states: RocksDB through rocksdict, changelog-backed, keys as JSON, values pickled and
read back only as the folds' own records."""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterable
from typing import Any, TypeAlias, TypeVar

import faust
from faust.serializers import codecs

from swarmlog.streams.budgets import AgentUsage
from swarmlog.streams.persistent import PSet
from swarmlog.streams.registry import AgentView
from swarmlog.streams.waitgraph import Wait

from .records import Consumed

CODEC = "swarmlog-fold"
FoldTable: TypeAlias = faust.Table[str, Any]
"""A table of fold states by string key."""
FOLD_RECORDS = (AgentView, AgentUsage, PSet, Wait)
"""The classes a table value may hold; the rest is str, int, None, tuples and frozensets."""
_ALLOWED = {(cls.__module__, cls.__qualname__) for cls in FOLD_RECORDS}


class _FoldUnpickler(pickle.Unpickler):
    """Builds the folds' records and plain values only: anything else in the bytes (a function to call on load, any
    other class) is refused before it runs."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(
                f"{module}.{name} is not a fold record; a table value holds only "
                f"{', '.join(sorted(cls.__name__ for cls in FOLD_RECORDS))}"
            )
        return super().find_class(module, name)


class FoldRecords(codecs.Codec):
    """Faust's pickle codec for table values, whose loads refuses what is not a fold record (the changelog is a topic,
    and who can write a topic must not be able to run code in the worker or in `swarmlog replay diff`)."""

    def _loads(self, s: bytes) -> Any:
        return _FoldUnpickler(io.BytesIO(s)).load()

    def _dumps(self, s: Any) -> bytes:
        return pickle.dumps(s)


codecs.register(CODEC, FoldRecords() | codecs.binary())  # base64, as Faust's "pickle": tables written before still read


def load_value(raw: bytes) -> Any:
    """A table value from its changelog or store bytes; ValueError (pickle.UnpicklingError among them) when the
    bytes are not a fold record."""
    try:
        return codecs.loads(CODEC, raw)
    except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, IndexError) as exc:
        raise ValueError(f"not a fold record: {type(exc).__name__}: {exc}") from None


def dump_value(value: Any) -> bytes:
    """A table value's changelog bytes (as Faust writes them, so either reads the other's)."""
    return codecs.dumps(CODEC, value)


def dump_key(key: str) -> bytes:
    """A table key's changelog bytes (JSON, as Faust's tables write them)."""
    return codecs.dumps("json", key)


def load_key(raw: bytes | None) -> str:
    """A table key from its changelog bytes; ValueError when they are not a JSON string."""
    try:
        key = codecs.loads("json", raw or b"")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a table key: {exc}") from None
    if not isinstance(key, str):
        raise ValueError(f"not a table key: {key!r}")
    return key


R = TypeVar("R", bound=Consumed)


def latest_rows(records: Iterable[R]) -> tuple[dict[str, Any], list[tuple[R, ValueError]]]:
    """A table's rows from its changelog records in order (the latest value per key; a tombstone drops the key), and
    the records that are not rows, each with why: whoever can write a changelog cannot stop its reader."""
    rows: dict[str, Any] = {}
    skipped: list[tuple[R, ValueError]] = []
    for record in records:
        try:
            key, value = load_key(record.key), None if record.value is None else load_value(record.value)
        except ValueError as exc:
            skipped.append((record, exc))
            continue
        if value is None:
            rows.pop(key, None)
        else:
            rows[key] = value
    return rows, skipped


def fold_table(app: faust.App, name: str, partitions: int | None = None) -> FoldTable:
    """A table of fold states (records of swarmlog.streams) by string key; missing keys read as None."""
    table = app.Table(name, default=None, partitions=partitions, options={"driver": "rocksdict"})
    assert isinstance(table, faust.Table), "the app's Table class is Faust's"
    # Faust derives serializers from key_type/value_type (JSON unless a faust Record says otherwise); the store is
    # built lazily from these attributes, so set them before first use...
    table.key_serializer, table.value_serializer = "json", CODEC
    # ...but the changelog topic was already built in Table.__init__, with JSON values: the table wrote pickles to
    # it and recovery could not read them back (any restore that had records to read stalled). Build it again.
    table.changelog_topic = table._new_changelog_topic()
    return table
