"""Faust tables that hold fold states: RocksDB through rocksdict, changelog-backed, keys as JSON, values pickled."""

from __future__ import annotations

import faust


def fold_table(app: faust.App, name: str, partitions: int | None = None) -> faust.Table:
    """A table of fold states (frozen dataclasses of swarmlog.streams) by string key; missing keys read as None."""
    table = app.Table(name, default=None, partitions=partitions, options={"driver": "rocksdict"})
    # Faust derives serializers from key_type/value_type (JSON unless a faust Record says otherwise); the store is
    # built lazily from these attributes, so set them before first use...
    table.key_serializer, table.value_serializer = "json", "pickle"
    # ...but the changelog topic was already built in Table.__init__, with JSON values: the table wrote pickles to
    # it and recovery could not read them back (any restore that had records to read stalled). Build it again.
    table.changelog_topic = table._new_changelog_topic()
    return table
