"""Keyed folds by agent_id: one event into a persistent map, or a run of events through a plain dict as a table does."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from swarmlog.schemas.events import Event

from .persistent import PMap

V = TypeVar("V")


def evolve_by_agent(values: Mapping[str, V], event: Event,
                    evolve_value: Callable[[V | None, Event], V | None]) -> Mapping[str, V]:
    """`values` with the event's agent_id entry through `evolve_value`; `values` itself when that changed nothing."""
    agent_id = event.data.get("agent_id")
    if not isinstance(agent_id, str):
        return values
    before = values.get(agent_id)
    after = evolve_value(before, event)
    if after is before or after is None:
        return values
    return PMap.of(values).set(agent_id, after)


def fold_by_agent(values: Mapping[str, V], events: Iterable[Event],
                  evolve_value: Callable[[V | None, Event], V | None]) -> PMap:
    """`values` after each event's agent_id entry went through `evolve_value` (which returns it itself if unchanged)."""
    held: dict[str, Any] = dict(values)
    for event in events:
        agent_id = event.data.get("agent_id")
        if isinstance(agent_id, str):
            before = held.get(agent_id)
            after = evolve_value(before, event)
            if after is not before and after is not None:
                held[agent_id] = after
    return PMap(held)
