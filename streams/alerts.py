"""Events the stream processors decide: the envelope, with time passed in and ids derived from what caused them."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from typing import Any

from swarmlog.schemas.events import EPOCH, Event

PRODUCER = "streams"


def from_millis(ms: int) -> datetime:
    """The aware UTC datetime of milliseconds since the epoch (exact, no float rounding)."""
    return EPOCH + timedelta(milliseconds=ms)


def derived_id(*parts: str | int) -> str:
    """A deterministic event id from the parts that identify a decision (same parts, same id)."""
    joined = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(joined.encode()).hexdigest()[:32]


def alert(
    name: str,
    now_ms: int,
    identity: tuple[str | int, ...],
    *,
    causation_id: str | None = None,
    correlation_id: str | None = None,
    **fields: Any,
) -> Event:
    """An event decided by the stream processors: id derived from `name` and `identity`, occurred at `now_ms`."""
    envelope = {
        "event_id": derived_id(name, *identity),
        "occurred_at": from_millis(now_ms),
        "correlation_id": correlation_id,
        "causation_id": causation_id,
        "producer": PRODUCER,
    }
    return Event(name, {**envelope, **fields})
