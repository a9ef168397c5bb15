"""Events the stream processors decide: the envelope, with time passed in and ids derived from what caused them."""

from __future__ import annotations

import hashlib
from typing import Any, TypeVar

from swarmlog.schemas.events import Event

PRODUCER = "streams"
E = TypeVar("E", bound=Event)


def derived_id(*parts: str | int) -> str:
    """A deterministic event id from the parts that identify a decision (same parts, same id)."""
    joined = "\x1f".join(str(part) for part in parts)
    return hashlib.sha256(joined.encode()).hexdigest()[:32]


def alert(
    event_class: type[E],
    now_ms: int,
    identity: tuple[str | int, ...],
    *,
    causation_id: str | None = None,
    correlation_id: str | None = None,
    **fields: Any,
) -> E:
    """An event decided by the stream processors: id derived from its record name and `identity`, occurred at
    `now_ms`."""
    return event_class(
        event_id=derived_id(event_class.name, *identity),
        occurred_at=now_ms,
        correlation_id=correlation_id,
        causation_id=causation_id,
        producer=PRODUCER,
        **fields,
    )
