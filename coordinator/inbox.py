"""The messages journal events send to agents: partition = the recipient's slot, key = its id."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from swarmlog.coordinator import deadlock
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event

RECIPIENT = {"TaskAssigned": "agent_id", "VoteRequested": "voter_agent_id", "TaskCancelled": "agent_id"}
"""Journal events that are themselves inbox messages, and the field naming their recipient."""


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """One inbox record: the event, its recipient and the recipient's slot."""

    event: Event
    agent_id: str
    slot: int


def messages(events: Iterable[Event], state: State) -> list[Message]:
    """The inbox messages of journal events, in order, addressed by the slots in `state` (which includes them)."""
    found = []
    for event in events:
        if event.name in RECIPIENT:
            message, agent_id = event, event.data[RECIPIENT[event.name]]
        elif event.name == "DeadlockBroken":
            message, agent_id = deadlock.answer(event), event.data["waiter_agent_id"]
        else:
            continue
        found.append(Message(message, agent_id, state.agents[agent_id].slot))
    return found
