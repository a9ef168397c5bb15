"""Keyed tables (registry, budgets) folded a chunk at a time: each partition's rows held decoded in memory with their
expiries, and written to the table once per changed row per chunk.

Folding event by event cost a table read (a RocksDB get and an unpickle) and a table write (a pickle, a RocksDB put
and a changelog record) per event. The worker is the only writer of the partitions it owns, so it holds their rows
itself, read from the table at a partition's first chunk since the worker started or the group rebalanced; a chunk
then costs one write per row it changed, whatever the number of its events (a changelog keeps only a row's last
value anyway).

A keyed table is partitioned like its topics. A chunk is folded partition by partition, each partition's events in
their order, and before each event the rows of its partition expired at its time are dropped
(swarmlog.streams.keyed): the rows the replay drops too, folding each partition on its own. Faust writes a row to the
partition of the current event, so a partition's rows are written while one of its events is current.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import faust

from swarmlog.schemas.events import Event
from swarmlog.streams.keyed import Expiries

from .expiry import Rebalances
from .records import RawRecord, inside
from .tables import FoldTable

CHUNK, CHUNK_S = 1000, 0.05
"""Events folded together: up to CHUNK, or what came within CHUNK_S seconds (a heartbeat is folded that much later
at most, well within the second a death may take beyond its timeout)."""
Evolve = Callable[[Any, Event], Any]
"""One row's fold: the row (None: none) after an event."""


class PartitionRows:
    """One partition's rows as its fold sees them, their expiries, and the rows changed since last written."""

    def __init__(self, rows: dict[str, Any], expires_at: Callable[[Any], int | None]) -> None:
        self._rows = rows
        self.rows: Mapping[str, Any] = rows
        """The rows, by key (read-only)."""
        self._expiries = Expiries(rows.items(), expires_at)
        self._changed: dict[str, None] = {}

    def fold(self, event: Event, key: str | None, evolve: Evolve) -> Any:
        """Drop the rows expired at the event's time, then fold the event into the row of `key` (None: the event is
        about no row); the row after it, dropped already if it has expired at the event's time."""
        at_ms, rows = event.occurred_at, self._rows
        if self._expiries.heap:
            for gone in self._expiries.expired(at_ms, rows.get):
                del rows[gone]
                self._changed[gone] = None
        if key is None:
            return None
        before = rows.get(key)
        after = evolve(before, event)
        if after is None or after is before or after == before:
            return after
        if self._expiries.keeps(key, before, after, at_ms):
            rows[key] = after
        elif before is not None:
            del rows[key]
        else:
            return after
        self._changed[key] = None
        return after

    def changes(self) -> dict[str, Any]:
        """The rows changed since last asked, by key (None: dropped); they count as written from now on."""
        changed = {key: self._rows.get(key) for key in self._changed}
        self._changed.clear()
        return changed

    def mark_changed(self, keys: Iterable[str]) -> None:
        """Count these rows as changed again (their write failed)."""
        self._changed.update(dict.fromkeys(keys))

    def write(self, table: FoldTable) -> None:
        """Write the rows changed since last written to `table` (inside an event of this partition)."""
        for key, value in self.changes().items():
            if value is not None:
                table[key] = value
            elif key in table:
                del table[key]


class KeyedRows:
    """The rows of a keyed table, held per partition while the worker owns it (all forgotten at a rebalance)."""

    def __init__(
        self, app: faust.App, table: FoldTable, topics: Iterable[str], expires_at: Callable[[Any], int | None]
    ) -> None:
        self.table = table
        self._app, self._topics = app, frozenset(topics)
        self._rebalances, self._expires_at = Rebalances(lambda: app.consumer_generation_id), expires_at
        self._partitions: dict[int, PartitionRows] = {}

    def items(self) -> dict[str, Any]:
        """Every row of the partitions the worker is assigned (for a timer, between chunks): as held, or read from the
        table while one of them is not held yet (none of its events folded since the start or the last rebalance)."""
        self._forget_at_rebalance()
        assigned = {tp.partition for tp in self._app.consumer.assignment() if tp.topic in self._topics}
        if not assigned <= self._partitions.keys():
            return dict(self.table.items())
        return {key: value for partition in assigned for key, value in self._partitions[partition].rows.items()}

    def of(self, partition: int) -> PartitionRows:
        """The rows of `partition`, read from the table unless held (inside an event of that partition)."""
        self._forget_at_rebalance()
        if partition not in self._partitions:
            # Inside an event a RocksDB-backed table reads that event's partition only (Faust keeps a database per
            # partition), so `key in table` says whether a row is this partition's.
            table = self.table
            rows = {key: value for key, value in table.items() if key in table}
            self._partitions[partition] = PartitionRows(rows, self._expires_at)
        return self._partitions[partition]

    def _forget_at_rebalance(self) -> None:
        if self._rebalances.since_asked():
            self._partitions.clear()

    def fold_chunk(
        self, chunk: Sequence[tuple[RawRecord, Event]], key_of: Callable[[Event], str | None], evolve: Evolve
    ) -> list[tuple[Event, Any]]:
        """Fold a chunk of the table's inputs partition by partition, then write each partition's changed rows; each
        event with its key's row after it (None for an event about no row)."""
        partitions: dict[int, list[tuple[RawRecord, Event]]] = {}
        for record, event in chunk:
            partitions.setdefault(record.message.partition, []).append((record, event))
        folded: list[tuple[Event, Any]] = []
        for partition, inputs in partitions.items():
            inside(inputs[-1][0])
            rows = self.of(partition)
            folded += [(event, rows.fold(event, key_of(event), evolve)) for _, event in inputs]
            rows.write(self.table)
        return folded
