"""Builders for the stream-processor tests: events on event time, folds, a stable serialization, the fold laws."""

from __future__ import annotations

import dataclasses
import functools
import json
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from typing import Any

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import from_fields


def event(name: str, at_ms: int, event_id: str, **fields: Any) -> Event:
    """An event of record `name` as a decoder gives it: envelope filled in, occurred_at in milliseconds."""
    envelope = {"event_id": event_id, "occurred_at": at_ms, "correlation_id": None, "causation_id": None}
    return from_fields(name, {**envelope, "producer": "test", **fields})


def task_started(at_ms: int) -> Event:
    """A TaskStarted: an event no stream processor folds."""
    fields = {"mission_id": "m", "task_id": "t", "replica": 0, "attempt": 1, "agent_id": "x"}
    return event("TaskStarted", at_ms, f"started-{at_ms}", **fields)


def fold(evolve: Callable[[Any, Event], Any], state: Any, events: Iterable[Event]) -> Any:
    """The state after folding `events` into `state`."""
    return functools.reduce(evolve, events, state)


def stable(value: Any) -> str:
    """A serialization that is equal exactly when two states are (dict and set order do not matter)."""
    return json.dumps(_plain(value), sort_keys=True)


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {field.name: _plain(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return dict(zip(value._fields, map(_plain, value), strict=False))
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, Set):
        return sorted((_plain(item) for item in value), key=json.dumps)
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def assert_fold_laws(
    evolve: Callable[[Any, Event], Any],
    initial: Any,
    events: Sequence[Event],
    split: int,
    evolve_all: Callable[[Any, Sequence[Event]], Any] | None = None,
) -> None:
    """Deterministic, never mutates its input, a redelivered event counts once, snapshot + tail == full fold,
    and the fold's batch form (if any) agrees with it from the start and from the snapshot."""
    full = fold(evolve, initial, events)
    assert stable(fold(evolve, initial, events)) == stable(full)
    state = initial
    for each in events:
        before = stable(state)
        after = evolve(state, each)
        assert stable(state) == before
        assert stable(evolve(after, each)) == stable(after)
        state = after
    snapshot = pickle.loads(pickle.dumps(fold(evolve, initial, events[:split])))
    assert stable(fold(evolve, snapshot, events[split:])) == stable(full)
    if evolve_all is not None:
        assert stable(evolve_all(initial, events)) == stable(full)
        assert stable(evolve_all(snapshot, events[split:])) == stable(full)
        assert stable(snapshot) == stable(fold(evolve, initial, events[:split]))  # the batch form mutated nothing
