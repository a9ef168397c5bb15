"""Inbox slots: each agent of a region gets an inbox partition of its own, from the region's share of the inbox.

The inbox's partitions are shared out between regions by index (region i of R holds the partitions p with
p % R == i), so coordinators allocate side by side without asking each other. An agent keeps its slot while it may
read it: asking again answers with the same slot. Its slot is released (SlotReleased) once it has been delisted and
not back for a retention: `Config.retain_goodbye_slot_ms` after it deregistered (it stopped reading; short, but not
zero, since every graceful stop deregisters), `Config.retain_slot_ms` after it was declared dead (a suspicion: it may
still read). A released slot is allocated again, lowest first, and an agent that comes back asks again and gets
whichever slot is free. Agents started with an explicit `--slot` are the operator's choice: their slots are
never allocated to another agent of the region (nor released).

The answer to a request is journaled and then written to swarm.agents.slots; a host that does not see it (the
coordinator crashed in between) asks again with a new request, which is answered again with the same slot. A release
is written there too, under the agent's key, so it supersedes the agent's allocation when the topic is compacted.
"""

from __future__ import annotations

from collections.abc import Iterable

from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import SlotAllocated, SlotReleased, SlotRequested


def share(state: State) -> range:
    """The inbox partitions this region allocates from."""
    config = state.config
    return range(config.regions.index(config.region), config.inbox_partitions, len(config.regions))


def taken(state: State) -> set[int]:
    """The slots no new agent may get: allocated ones, and every enlisted agent's whose slot was not released."""
    return {*state.slots.values(), *(agent.slot for agent in state.agents.values() if not agent.released)}


def on_requested(draft: Draft, requested: SlotRequested) -> None:
    """Allocate the agent its slot (the same one again when it has one); nothing when the region's share is full."""
    state = draft.state
    if requested.region != state.config.region or state.config.region not in state.config.regions:
        return
    if state.slot_requests.get(requested.agent_id) == requested.event_id:
        return  # this request was answered (a redelivery); a new one is answered again, in case the answer was lost
    slot = state.slots.get(requested.agent_id)
    if slot is None:
        busy = taken(state)
        slot = next((free for free in share(state) if free not in busy), None)
    if slot is not None:
        draft.emit(
            SlotAllocated,
            None,
            agent_id=requested.agent_id,
            region=state.config.region,
            slot=slot,
            partitions=state.config.inbox_partitions,
        )


def release(draft: Draft, agent_id: str, reason: str) -> None:
    """SlotReleased for a delisted agent's allocated slot (nothing when it holds none, or is enlisted)."""
    state = draft.state
    agent = state.agents.get(agent_id)
    slot = state.slots.get(agent_id)
    if slot is None or (agent is not None and agent.alive):
        return
    draft.emit(SlotReleased, None, agent_id=agent_id, region=state.config.region, slot=slot, reason=reason)


def release_due(draft: Draft) -> None:
    """Release the slots of agents delisted longer than their retention and not back: `retain_goodbye_slot_ms` for
    one that deregistered, `retain_slot_ms` for one declared dead."""
    config = draft.state.config
    for agent_id in sorted(draft.state.slots):
        agent = draft.state.agents.get(agent_id)
        if agent is None or agent.alive or agent.delisted_at is None:
            continue  # enlisted, or never enlisted here (a request whose agent never registered)
        retain = config.retain_goodbye_slot_ms if agent.goodbye else config.retain_slot_ms
        if draft.now_ms - agent.delisted_at >= retain:
            how = "deregistered" if agent.goodbye else "declared dead"
            release(draft, agent_id, f"{how} {draft.now_ms - agent.delisted_at} ms ago")


def announced(events: Iterable[Event]) -> list[SlotAllocated | SlotReleased]:
    """The allocations and releases among a decision's journal events: each is also written to swarm.agents.slots
    (keyed by its agent), where the agent's host reads it."""
    return [event for event in events if isinstance(event, SlotAllocated | SlotReleased)]
