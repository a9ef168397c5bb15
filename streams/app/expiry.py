"""What the worker keeps only for a while: the rows of a keyed table until they expire, and the decisions in flight.

A keyed table (registry, budgets) is partitioned like its topics, and its fold drops, before each event, the rows of
the event's partition that have expired at the event's time (swarmlog.streams.keyed): the rows the replay drops too,
folding each partition on its own. Faust writes a row's changelog record to the partition of the event being
processed, so a row is only ever deleted while an event of its own partition is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import faust

from swarmlog.streams.keyed import Expiries

from .tables import FoldTable


class Rebalances:
    """Whether the group rebalanced (its generation changed), so partitions may have moved, since last asked."""

    def __init__(self, app: faust.App) -> None:
        self._app = app
        self._generation = app.consumer_generation_id

    def since_asked(self) -> bool:
        """Whether a rebalance happened since the last call (or since this was built)."""
        generation, self._generation = self._generation, self._app.consumer_generation_id
        return generation != self._generation


class Expiring:
    """When the rows of a keyed table expire, per partition, kept up as the fold writes; a partition's are read from
    the table at its first event since the worker started or the group rebalanced."""

    def __init__(self, app: faust.App, table: FoldTable, expires_at: Callable[[Any], int | None]) -> None:
        self._rebalances, self._table, self._expires_at = Rebalances(app), table, expires_at
        self._partitions: dict[int, Expiries[Any]] = {}

    def drop_expired(self, partition: int, now_ms: int) -> None:
        """Delete the rows of `partition` expired at `now_ms` (inside an event of that partition)."""
        table = self._table
        for key in self._of(partition).expired(now_ms, table.get):
            del table[key]

    def put(self, partition: int, key: str, before: Any, after: Any, now_ms: int) -> None:
        """Write `after` over `before` (None: no row) at `key` of `partition`, or delete the row if `after` has
        expired at `now_ms` already (inside an event of that partition)."""
        if self._of(partition).keeps(key, before, after, now_ms):
            self._table[key] = after
        elif before is not None:
            del self._table[key]

    def _of(self, partition: int) -> Expiries[Any]:
        if self._rebalances.since_asked():
            self._partitions.clear()
        if partition not in self._partitions:
            # Inside an event a RocksDB-backed table reads that event's partition only (Faust keeps a database per
            # partition), so `key in table` says whether a row is this partition's.
            table = self._table
            self._partitions[partition] = Expiries(
                ((key, value) for key, value in table.items() if key in table), self._expires_at
            )
        return self._partitions[partition]


class InFlight:
    """The ids of decisions sent and not folded back yet, which a tick does not send again. Forgotten at a rebalance:
    a decision of a partition that moved is folded by its new owner, and one sent again is a duplicate its readers
    drop (decisions' ids are derived from what they decide)."""

    def __init__(self, app: faust.App) -> None:
        self._rebalances = Rebalances(app)
        self._ids: set[str] = set()

    def sending(self, event_id: str) -> bool:
        """Whether to send the decision `event_id` (it is not in flight yet); it is in flight from now on."""
        if self._rebalances.since_asked():
            self._ids.clear()
        if event_id in self._ids:
            return False
        self._ids.add(event_id)
        return True

    def folded(self, event_id: str) -> None:
        """The event `event_id` was folded: if it was a decision in flight, it has landed."""
        self._ids.discard(event_id)
