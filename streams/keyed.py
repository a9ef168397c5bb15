"""Keyed folds by agent_id: one event into a persistent map, or a run of events through a plain dict as a table does.

An entry may expire: `expires_at(value)` is the event time from which no decision needs it any more (None: never).
Before an event is folded, every entry expired at the event's time is dropped, and an entry the event leaves expired
is not kept; so what a table holds is bounded by what is still current, and the same log drops the same entries
wherever it is folded. A keyed table of the worker is folded per partition, so "every entry" is every entry of the
event's partition (see streams/app/expiry.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

from swarmlog.schemas.events import Event

from .persistent import PMap

V = TypeVar("V")
RETENTION_MS = 600_000
"""How long a keyed table keeps an entry after the last moment a decision could need it (see each fold's
`expires_at`): ten minutes of event time, far beyond a liveness timeout or a redelivery."""


def evolve_by_agent(
    values: Mapping[str, V],
    event: Event,
    agent_of: Callable[[Event], str | None],
    evolve_value: Callable[[V | None, Event], V | None],
    expires_at: Callable[[V], int | None],
) -> Mapping[str, V]:
    """`values` without the entries expired at the event's time, then with the entry of the event's agent (`agent_of`)
    through `evolve_value` (gone if that left it expired); `values` itself when that changed nothing (a scan of every
    entry: `fold_by_agent` is the fast form)."""
    now_ms = event.occurred_at
    gone = [key for key, value in values.items() if _expired(value, now_ms, expires_at)]
    if gone:
        kept = PMap.of(values)
        for key in gone:
            kept = kept.delete(key)
        values = kept
    agent_id = agent_of(event)
    if agent_id is None:
        return values
    before = values.get(agent_id)
    after = evolve_value(before, event)
    if after is before or after is None:
        return values
    if _expired(after, now_ms, expires_at):
        return PMap.of(values).delete(agent_id)
    return PMap.of(values).set(agent_id, after)


def fold_by_agent(
    values: Mapping[str, V],
    events: Iterable[Event],
    agent_of: Callable[[Event], str | None],
    evolve_value: Callable[[V | None, Event], V | None],
    expires_at: Callable[[V], int | None],
) -> PMap[str, V]:
    """`evolve_by_agent` over `events` in order, with the entries in a dict and their expiries in a heap meanwhile."""
    held: dict[str, V] = dict(values)
    expiries = Expiries(held.items(), expires_at)
    for event in events:
        if expiries.heap:
            for key in expiries.expired(event.occurred_at, held.get):
                del held[key]
        agent_id = agent_of(event)
        if agent_id is not None:
            before = held.get(agent_id)
            after = evolve_value(before, event)
            if after is before or after is None:
                continue
            if expires_at(after) is None or expiries.keeps(agent_id, before, after, event.occurred_at):
                held[agent_id] = after  # (an entry that never expires, the usual one, skips the call)
            else:
                held.pop(agent_id, None)
    return PMap(held)


def _expired(value: V, now_ms: int, expires_at: Callable[[V], int | None]) -> bool:
    at = expires_at(value)
    return at is not None and at <= now_ms


class Expiries(Generic[V]):
    """When the entries of a keyed state expire, soonest first: a heap, kept up as entries change, whose outdated
    times are skipped when they come up."""

    def __init__(self, entries: Iterable[tuple[str, V]], expires_at: Callable[[V], int | None]) -> None:
        self._expires_at = expires_at
        self.heap = [(at, key) for key, value in entries if (at := expires_at(value)) is not None]
        """(expiry, key) pairs, soonest first: empty when nothing is due to expire."""
        heapq.heapify(self.heap)

    def keeps(self, key: str, before: V | None, after: V, now_ms: int) -> bool:
        """Whether the entry of `key`, `before` (None: none) until an event at `now_ms`, is kept as `after`: not when
        it has expired at `now_ms` already; else its expiry is kept up."""
        at = self._expires_at(after)
        if at is None:
            return True
        if at <= now_ms:
            return False
        if before is None or self._expires_at(before) != at:
            heapq.heappush(self.heap, (at, key))
        return True

    def expired(self, now_ms: int, current: Callable[[str], V | None]) -> list[str]:
        """The keys whose entries (`current(key)` now) have expired at `now_ms`; they are no longer due after this."""
        gone: dict[str, None] = {}
        while self.heap and self.heap[0][0] <= now_ms:
            at, key = heapq.heappop(self.heap)
            value = current(key)
            if value is not None and self._expires_at(value) == at:  # else it changed since, and is due another time
                gone[key] = None
        return list(gone)
