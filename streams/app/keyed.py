"""A keyed table's rows of one partition held decoded in memory, with their expiries, and the rows changed since
last written (streams/app/grouped.py writes them to the changelog).

Folding event by event through a table cost a read (a get and an unpickle) and a write (a pickle, a put and a
changelog record) per event. The worker is the only writer of the partitions it owns, so it holds their rows itself
and writes each changed row once per flush, whatever the number of its events (a changelog keeps only a row's last
value anyway).

A keyed table is partitioned like its topics. Before each event the rows of its partition expired at its time are
dropped (swarmlog.streams.keyed): the rows the replay drops too, folding each partition on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from swarmlog.schemas.events import Event
from swarmlog.streams.keyed import Expiries

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
