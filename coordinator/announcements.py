"""Which regions a live coordinator serves, from their CoordinatorAnnounced events: a pure fold and a decision.

A region's announcements, in log order, say who holds it: the first claim does, and another coordinator's word counts
only once the holder's latest is a stop or has gone silent by that word's own time. A word made while the holder still
serves is void: its coordinator claimed a region held by another, and must stop. Every reader folds the same log, so
every reader (the holder, a rival, a client) agrees on who holds a region.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import TypedDict

from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import CoordinatorAnnounced

MISSED_INTERVALS = 3
"""A coordinator silent for this many of its announcement intervals no longer serves its region."""
LEASE_INTERVALS = 2
"""A coordinator decides for this many intervals after its latest announcement known to hold the region: one interval
before a rival may take the region over, a margin for the clocks of two hosts and a pause between check and write."""


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

    @property
    def lease_until_ms(self) -> int:
        """Until when the coordinator that announced this may decide without checking that it still holds the region."""
        return self.at_ms + LEASE_INTERVALS * self.interval_ms

    def serves_at(self, now_ms: int) -> bool:
        """Whether the region is served at `now_ms`: announced as serving, and not silent for too long."""
        return self.serving and now_ms < self.silent_from_ms

    @property
    def silent_from_ms(self) -> int:
        """When a coordinator that announced this and said no more stops counting as serving its region."""
        return self.at_ms + MISSED_INTERVALS * self.interval_ms + 1


def evolve(latest: Mapping[str, Announcement], event: Event) -> Mapping[str, Announcement]:
    """Fold one CoordinatorAnnounced in: it becomes its region's latest word when it is the holder's own (and not older
    than its latest), or when the holder's latest no longer serves at its time; else it is void and changes nothing."""
    if not isinstance(event, CoordinatorAnnounced):
        return latest
    before = latest.get(event.region)
    if before is not None:
        if before.coordinator_id == event.coordinator_id:
            if before.at_ms > event.occurred_at:
                return latest
        elif before.serves_at(event.occurred_at):
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


def holds(latest: Mapping[str, Announcement], region: str, own_id: str) -> bool:
    """Whether the coordinator `own_id` holds `region` by the fold `latest`: its latest word is the region's and serving
    (a claim of its that the log holds after another's serving one was void)."""
    announced = latest.get(region)
    return announced is not None and announced.coordinator_id == own_id and announced.serving


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
