"""Which regions a live coordinator serves, from their CoordinatorAnnounced events: a pure fold and a decision."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TypedDict

from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import CoordinatorAnnounced

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
        return self.serving and now_ms < self.silent_from_ms

    @property
    def silent_from_ms(self) -> int:
        """When a coordinator that announced this and said no more stops counting as serving its region."""
        return self.at_ms + MISSED_INTERVALS * self.interval_ms + 1


def evolve(latest: Mapping[str, Announcement], event: Event) -> Mapping[str, Announcement]:
    """Fold one CoordinatorAnnounced in: the newest announcement per region wins (an older one changes nothing)."""
    if not isinstance(event, CoordinatorAnnounced):
        return latest
    announced = Announcement(
        region=event.region,
        coordinator_id=event.coordinator_id,
        serving=event.serving,
        at_ms=event.occurred_at,
        interval_ms=event.interval_ms,
        agents=event.agents,
        idle_agents=event.idle_agents,
        active_missions=event.active_missions,
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


def rival(latest: Mapping[str, Announcement], region: str, own_id: str, now_ms: int) -> Announcement | None:
    """The announcement of another coordinator that serves `region` at `now_ms`, or None. Nothing fences a second
    live coordinator of a region (both would decide and write its journal), so one must not start beside it; an
    announcement under `own_id` is this process's own predecessor (a service restarted in it)."""
    announced = latest.get(region)
    if announced is None or announced.coordinator_id == own_id or not announced.serves_at(now_ms):
        return None
    return announced


def first_claim(events: Iterable[Event], region: str) -> str | None:
    """The coordinator whose announcement that it serves `region` comes first among `events` (in log order)."""
    return next(
        (e.coordinator_id for e in events if isinstance(e, CoordinatorAnnounced) and e.region == region and e.serving),
        None,
    )


class Figures(TypedDict):
    """What a CoordinatorAnnounced tells about its region besides who serves it."""

    agents: int
    idle_agents: int
    active_missions: int


def figures(state: State) -> Figures:
    """What a coordinator announces about its region: alive and idle agents, missions not ended."""
    alive = [agent for agent in state.agents.values() if agent.alive]
    return {
        "agents": len(alive),
        "idle_agents": sum(1 for agent in alive if not agent.busy and not agent.throttled),
        "active_missions": sum(1 for mission in state.missions.values() if mission.active),
    }
