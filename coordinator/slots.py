"""Inbox slots: each agent of a region gets an inbox partition of its own, from the region's share of the inbox.

The inbox's partitions are shared out between regions by index (region i of R holds the partitions p with
p % R == i), so coordinators allocate side by side without asking each other. An agent keeps its slot for good (its
checkpointed inbox position stays valid), and asking again answers with the same slot. Agents started with an
explicit `--slot` are the operator's choice: their slots are never allocated to another agent of the region.

The answer to a request is journaled and then written to swarm.agents.slots; a host that does not see it (the
coordinator crashed in between) asks again with a new request, which is answered again with the same slot.
"""

from __future__ import annotations

from collections.abc import Iterable

from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import SlotAllocated, SlotRequested


def share(state: State) -> range:
    """The inbox partitions this region allocates from."""
    config = state.config
    return range(config.regions.index(config.region), config.inbox_partitions, len(config.regions))


def on_requested(draft: Draft, requested: SlotRequested) -> None:
    """Allocate the agent its slot (the same one again when it has one); nothing when the region's share is full."""
    state = draft.state
    if requested.region != state.config.region or state.config.region not in state.config.regions:
        return
    if state.slot_requests.get(requested.agent_id) == requested.event_id:
        return  # this request was answered (a redelivery); a new one is answered again, in case the answer was lost
    slot = state.slots.get(requested.agent_id)
    if slot is None:
        taken = {*state.slots.values(), *(agent.slot for agent in state.agents.values())}
        slot = next((free for free in share(state) if free not in taken), None)
    if slot is not None:
        draft.emit(
            SlotAllocated,
            None,
            agent_id=requested.agent_id,
            region=state.config.region,
            slot=slot,
            partitions=state.config.inbox_partitions,
        )


def announced(events: Iterable[Event]) -> list[SlotAllocated]:
    """The allocations among a decision's journal events: each is also written to swarm.agents.slots (keyed by its
    agent), where the agent's host reads it."""
    return [event for event in events if isinstance(event, SlotAllocated)]
