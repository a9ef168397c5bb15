"""Stamps new events with the envelope at the edge of the system, where clocks and random ids belong."""

from __future__ import annotations

import time
import uuid
from typing import Any

from swarmlog.schemas.events import Event


def stamp(
    name: str,
    *,
    producer: str,
    correlation_id: str | None = None,
    causation_id: str | None = None,
    event_id: str | None = None,
    occurred_at_ms: int | None = None,
    **fields: Any,
) -> Event:
    """A new event with a fresh id and the current time unless they are given."""
    envelope = {
        "event_id": event_id or uuid.uuid4().hex,
        "occurred_at": occurred_at_ms if occurred_at_ms is not None else now_ms(),
        "correlation_id": correlation_id,
        "causation_id": causation_id,
        "producer": producer,
    }
    return Event(name, envelope | fields)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
