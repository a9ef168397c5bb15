"""Which regions a live coordinator serves, from their CoordinatorAnnounced events: a pure fold and a decision."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event, to_millis

MISSED_INTERVALS = 3
"""A coordinator silent for this many of its announcement intervals no longer serves its region."""


@dataclasses.dataclass(frozen=True, slots=True)
class Announcement:
    """The latest word of a region's coordinator."""

    region: str
    coordinator_id: str
    serving: bool
    at_ms: int
    interval_ms: int
    agents: int
    idle_agents: int
    active_missions: int

    def serves_at(self, now_ms: int) -> bool:
        """Whether the region is served at `now_ms`: announced as serving, and not silent for too long."""
        return self.serving and now_ms - self.at_ms <= MISSED_INTERVALS * self.interval_ms


def evolve(latest: Mapping[str, Announcement], event: Event) -> Mapping[str, Announcement]:
    """Fold one CoordinatorAnnounced in: the newest announcement per region wins (an older one changes nothing)."""
    if event.name != "CoordinatorAnnounced":
        return latest
    data = event.data
    announced = Announcement(
        region=data["region"],
        coordinator_id=data["coordinator_id"],
        serving=data["serving"],
        at_ms=to_millis(data["occurred_at"]),
        interval_ms=data["interval_ms"],
        agents=data["agents"],
        idle_agents=data["idle_agents"],
        active_missions=data["active_missions"],
    )
    before = latest.get(announced.region)
    if before is not None and before.at_ms > announced.at_ms:
        return latest
    return {**latest, announced.region: announced}


def fold(events: Iterable[Event]) -> Mapping[str, Announcement]:
    """The latest announcement of every region among `events`."""
    latest: Mapping[str, Announcement] = {}
    for event in events:
        latest = evolve(latest, event)
    return latest


def served(latest: Mapping[str, Announcement], regions: Iterable[str], now_ms: int) -> tuple[str, ...]:
    """Those of `regions` that a live coordinator serves at `now_ms`, in their order."""
    return tuple(region for region in regions if region in latest and latest[region].serves_at(now_ms))


def figures(state: State) -> dict[str, Any]:
    """What a coordinator announces about its region: alive and idle agents, missions not ended."""
    alive = [agent for agent in state.agents.values() if agent.alive]
    return {
        "agents": len(alive),
        "idle_agents": sum(1 for agent in alive if not agent.busy and not agent.throttled),
        "active_missions": sum(1 for mission in state.missions.values() if mission.active),
    }
