"""The messages journal events send to agents: partition = the recipient's slot, key = its id."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from swarmlog.coordinator import deadlock
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import DeadlockBroken, TaskAssigned, TaskCancelled, VoteRequested


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
        message: Event
        match event:  # assignments, cancellations and vote requests are messages; a broken deadlock sends an answer
            case TaskAssigned(agent_id=agent_id) | TaskCancelled(agent_id=agent_id):
                message = event
            case VoteRequested(voter_agent_id=agent_id):
                message = event
            case DeadlockBroken(waiter_agent_id=agent_id):
                message = deadlock.answer(event)
            case _:
                continue
        found.append(Message(message, agent_id, state.agents[agent_id].slot))
    return found
