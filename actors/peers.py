"""The peers an agent may ask, pure: a fold of the registry topic, and how an ask's target names one of them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentDeclaredDead, AgentDeregistered, AgentRegistered

MAX_TARGETS = 16
"""Peers offered to the model at most (the ask's target is an enum in its output grammar)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Peer:
    """A registered agent as a questioner needs it: where its inbox is, its region, what it can do."""

    slot: int
    region: str
    capabilities: tuple[str, ...]


def evolve_peers(peers: Mapping[str, Peer], event: Event) -> Mapping[str, Peer]:
    """The directory after one registry event: a registration adds (or moves) an agent, a leave or death drops it."""
    match event:
        case AgentRegistered():  # to the end: the directory runs from the longest to the latest registered
            others = {agent_id: peer for agent_id, peer in peers.items() if agent_id != event.agent_id}
            return {**others, event.agent_id: Peer(event.slot, event.region, tuple(event.capabilities))}
        case AgentDeregistered() | AgentDeclaredDead() if event.agent_id in peers:
            return {agent_id: peer for agent_id, peer in peers.items() if agent_id != event.agent_id}
        case _:
            return peers


def targets(peers: Mapping[str, Peer], me: str, region: str) -> tuple[str, ...]:
    """What an ask may name: the ids of this region's other agents (the latest registered, most likely alive), then
    their capabilities; at most MAX_TARGETS, sorted."""
    latest = [agent_id for agent_id, peer in reversed(list(peers.items())) if agent_id != me and peer.region == region]
    ids = sorted(latest[:MAX_TARGETS])
    capabilities = sorted({c for agent_id in ids for c in peers[agent_id].capabilities} - set(ids))
    return (*ids, *capabilities)[:MAX_TARGETS]


def resolve(peers: Mapping[str, Peer], me: str, region: str, target: str) -> tuple[str, int] | None:
    """The agent (id, slot) an ask's target names: that agent, else the first of the region's others with that
    capability; None when there is none."""
    peer = peers.get(target)
    if peer is not None and target != me:
        return target, peer.slot
    able = sorted(
        agent_id
        for agent_id, peer in peers.items()
        if agent_id != me and peer.region == region and target in peer.capabilities
    )
    return (able[0], peers[able[0]].slot) if able else None
