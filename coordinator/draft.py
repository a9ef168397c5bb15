"""A decision being made: events emitted with deterministic envelopes, folded into the state as they go."""

from __future__ import annotations

from typing import Any, TypeVar

from swarmlog.coordinator.evolve import evolve
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event

E = TypeVar("E", bound=Event)


class Draft:
    """The events a command has produced so far and the state they lead to; decisions read `state`, never the input."""

    def __init__(self, state: State, cause_id: str, now_ms: int) -> None:
        self.state = state
        self.cause_id = cause_id
        self.now_ms = now_ms
        self.events: list[Event] = []
        self.touched: dict[str, None] = {}
        self.routed_bytes = 0
        """About how many bytes of assignments and queue entries the decision holds (dispatch.route counts them)."""

    def emit(self, event_class: type[E], mission_id: str | None, /, **fields: Any) -> E:
        """Append an event (id f"{cause}/{index}", occurred now, caused by the command), fold it, and return it."""
        event = event_class(
            event_id=f"{self.cause_id}/{len(self.events)}",
            occurred_at=self.now_ms,
            correlation_id=mission_id,
            causation_id=self.cause_id,
            producer=f"coordinator:{self.state.config.region}",
            **fields,
        )
        self.events.append(event)
        self.state = evolve(self.state, event)
        if mission_id is not None:
            self.touched[mission_id] = None
        return event
