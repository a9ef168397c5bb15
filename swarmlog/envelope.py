"""Stamps new events with the envelope at the edge of the system, where clocks and random ids belong."""

from __future__ import annotations

import time
import uuid
from typing import Any, TypeVar

from swarmlog.schemas.events import Event

E = TypeVar("E", bound=Event)


def stamp(
    event_class: type[E],
    /,
    *,
    producer: str,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    event_id: str | None = None,
    occurred_at_ms: int | None = None,
    **fields: Any,
) -> E:
    """A new event of class `event_class` with a fresh id and the current time unless they are given."""
    return event_class(
        event_id=event_id or uuid.uuid4().hex,
        occurred_at=occurred_at_ms if occurred_at_ms is not None else now_ms(),
        correlation_id=correlation_id,
        causation_id=causation_id,
        producer=producer,
        **fields,
    )


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
