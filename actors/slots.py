"""Which inbox slots a host's agents hold: the fold of swarm.agents.slots for them (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import SlotAllocated, SlotReleased


def allocated(held: Mapping[str, int], event: Event, regions: Mapping[str, str]) -> Mapping[str, int]:
    """`held` (agent id → slot) with a SlotAllocated to one of `regions`' agents (agent id → its region) in its own
    region, or without the slot a SlotReleased took back (the agent asks again); an allocation in another region is
    no longer the agent's once it moved."""
    match event:
        case SlotAllocated(agent_id=agent_id, region=region, slot=slot) if regions.get(agent_id) == region:
            return {**held, agent_id: slot}
        case SlotReleased(agent_id=agent_id, slot=slot) if held.get(agent_id) == slot:
            return {key: value for key, value in held.items() if key != agent_id}
    return held
