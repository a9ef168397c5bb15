"""What the coordinator is asked to decide on, and what it answers."""

from __future__ import annotations

import dataclasses

from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event


@dataclasses.dataclass(frozen=True, slots=True)
class Receive:
    """Decide on one input event (a mission, a task result, a vote, a registry or alert event) at now_ms."""

    event: Event
    now_ms: int

    @property
    def cause_id(self) -> str:
        """The id the emitted events derive theirs from and name as their cause."""
        return self.event.event_id


@dataclasses.dataclass(frozen=True, slots=True)
class Tick:
    """Let time pass to now_ms: deadlines, consensus windows and start timeouts expire on ticks.

    `inputs_since_ms`: since when the coordinator has read its inputs without a gap (its start, the end of a broker
    outage). A start reported during a gap may still be unread, so no attempt is taken back for a silence before it.
    """

    now_ms: int
    tick_id: str
    inputs_since_ms: int = 0

    @property
    def cause_id(self) -> str:
        """The id the emitted events derive theirs from and name as their cause."""
        return self.tick_id


Command = Receive | Tick


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The journal events a command produced, in order (their inbox messages follow from them: `inbox.messages`)."""

    events: tuple[Event, ...] = ()
    state: State | None = dataclasses.field(default=None, compare=False)
    """The state after the events (their fold over the state decided on), so the shell need not fold them again;
    None when there are none."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rejected:
    """An input the coordinator cannot act on (dead-letter it); the state is unchanged."""

    reason: str
