"""The messages journal events send to agents: on the inbox, partition = the recipient's slot, key = its id; a slot
allocation or release also goes to swarm.agents.slots, keyed by the agent (its host reads it there, before it has a slot)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from swarmlog.coordinator import deadlock
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    DeadlockBroken,
    SlotAllocated,
    SlotReleased,
    TaskAssigned,
    TaskCancelled,
    VoteRequested,
)
from swarmlog.topics import INBOX, SLOTS


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    """One record for an agent: the event, its recipient, the partition (None: by key) and the topic."""

    event: Event
    agent_id: str
    slot: int | None
    topic: str = INBOX


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
            case SlotAllocated(agent_id=agent_id) | SlotReleased(agent_id=agent_id):
                found.append(Message(event, agent_id, None, SLOTS))
                continue
            case _:
                continue
        found.append(Message(message, agent_id, state.agents[agent_id].slot))
    return found
