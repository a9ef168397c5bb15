"""The agent registry and liveness: a pure fold of registrations, heartbeats and deaths, and the death decision.

Rules (all on event time, so replay gives the same answers):
- a registration applies only if it is newer, by (occurred_at, event_id), than the current one; it starts a
  new epoch, revives the agent and counts as its first heartbeat;
- a heartbeat counts only for the run it names (`registration_id`), so stale heartbeats of an older run are
  ignored; the last heartbeat never moves backwards; status and in-flight task come from the heartbeat with
  the highest sequence of the run;
- an agent is declared dead once when `now - last heartbeat > timeout`; the death names its run's
  `registration_id`, so a death decided for an older run never kills a newer one;
- a deregistration after the current registration takes the agent out of liveness; heartbeats never revive anyone;
- a dead or deregistered agent's view is dropped RETENTION_MS after its run was last heard of (`expires_at`): no
  decision reads it, a stale heartbeat, death or deregistration of that run finds no view and changes nothing, and a
  later registration starts the agent afresh (epoch 1, alive).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Literal, NamedTuple

from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDeregistered,
    AgentHeartbeat,
    AgentRegistered,
    AgentStatus,
)
from swarmlog.topics import HEARTBEATS, REGISTRY

from .alerts import alert
from .keyed import RETENTION_MS, evolve_by_agent, fold_by_agent
from .persistent import PMap, replace

Liveness = Literal["alive", "dead", "deregistered"]
DEFAULT_TIMEOUT_MS = 5000


class AgentView(NamedTuple):
    """What the registry knows of one agent in its current epoch.

    A named tuple, not a frozen dataclass: every heartbeat builds a new one, and a tuple of 16 fields is built four
    times faster than a frozen dataclass sets 16 slots (the registry's replay rate depends on it).
    """

    agent_id: str
    capabilities: tuple[str, ...]
    model: str
    brain: str
    node: str
    gpu: int | None
    region: str
    slot: int
    epoch: int
    registration_id: str
    registered_at_ms: int
    last_heartbeat_ms: int
    last_sequence: int = -1
    status: AgentStatus = "IDLE"
    in_flight_task: str | None = None
    liveness: Liveness = "alive"

    @property
    def alive(self) -> bool:
        """Whether the agent counts as alive (registered, not declared dead, not deregistered)."""
        return self.liveness == "alive"


@dataclasses.dataclass(frozen=True, slots=True)
class Registry:
    """Every agent's view, by agent id (never mutated once built)."""

    agents: Mapping[str, AgentView] = dataclasses.field(default_factory=PMap)


INITIAL = Registry()


def agent_of(event: Event) -> str | None:
    """The agent a registry or heartbeat event is about; None for any other event."""
    match event:
        case AgentRegistered() | AgentHeartbeat() | AgentDeclaredDead() | AgentDeregistered():
            return event.agent_id
        case _:
            return None


def evolve_agent(view: AgentView | None, event: Event) -> AgentView | None:
    """One agent's view after `event` (the per-key fold a keyed table runs)."""
    if isinstance(event, AgentRegistered):
        return _registered(view, event)
    if view is None:
        return None
    match event:
        case AgentHeartbeat() if event.registration_id == view.registration_id:
            return _heartbeat(view, event)
        case AgentDeclaredDead() if event.registration_id == view.registration_id:
            return replace(view, liveness="dead") if view.alive else view
        case AgentDeregistered() if event.occurred_at >= view.registered_at_ms:
            return view if view.liveness == "deregistered" else replace(view, liveness="deregistered")
        case _:
            return view


def expires_at(view: AgentView) -> int | None:
    """When a dead or deregistered agent's view may go: RETENTION_MS after its run was last heard of; None while
    it counts as alive."""
    return None if view.alive else view.last_heartbeat_ms + RETENTION_MS


def evolve(state: Registry, event: Event) -> Registry:
    """The registry after `event`, without the views expired by its time; other events leave it as it is."""
    agents = evolve_by_agent(state.agents, event, agent_of, evolve_agent, expires_at)
    return state if agents is state.agents else Registry(agents)


def evolve_all(state: Registry, events: Iterable[Event]) -> Registry:
    """`evolve` over `events` in order, with the views held in a dict meanwhile, as the worker's table holds them."""
    return Registry(fold_by_agent(state.agents, events, agent_of, evolve_agent, expires_at))


def silent(view: AgentView, now_ms: int, timeout_ms: int = DEFAULT_TIMEOUT_MS, watched_since_ms: int = 0) -> bool:
    """Whether the agent counts as alive but has been unheard for more than `timeout_ms` at `now_ms`, its silence
    counted from `watched_since_ms` at the earliest (see `decide_liveness`)."""
    return view.alive and now_ms >= silent_from_ms(view, timeout_ms, watched_since_ms)


def silent_from_ms(view: AgentView, timeout_ms: int, watched_since_ms: int) -> int:
    """The first moment at which the agent, while alive, counts as silent."""
    return max(view.last_heartbeat_ms, watched_since_ms) + timeout_ms + 1


def next_silence_ms(state: Registry, timeout_ms: int = DEFAULT_TIMEOUT_MS, watched_since_ms: int = 0) -> int | None:
    """The first moment at which an alive agent counts as silent (`silent`), or None when no agent is alive."""
    alive = (view for view in state.agents.values() if view.alive)
    return min((silent_from_ms(view, timeout_ms, watched_since_ms) for view in alive), default=None)


def decide_liveness(
    state: Registry, now_ms: int, timeout_ms: int = DEFAULT_TIMEOUT_MS, watched_since_ms: int = 0
) -> list[AgentDeclaredDead]:
    """AgentDeclaredDead for each alive agent silent for more than `timeout_ms` at `now_ms`, once per epoch.

    Silence counts from `watched_since_ms` at the earliest: the time since which the decider has read the log without
    a gap. Before it the log could not be read (a broker outage), so no heartbeat could arrive and the silence is the
    outage's, not the agent's: every agent gets a full timeout after the log is back.
    """
    return [
        alert(
            AgentDeclaredDead,
            now_ms,
            (view.agent_id, view.registration_id),
            causation_id=view.registration_id,
            agent_id=view.agent_id,
            registration_id=view.registration_id,
            last_heartbeat_at=view.last_heartbeat_ms,
            timeout_ms=timeout_ms,
            in_flight_task=view.in_flight_task,
        )
        for view in sorted(state.agents.values(), key=lambda v: v.agent_id)
        if silent(view, now_ms, timeout_ms, watched_since_ms)
    ]


PROJECTION: Projection[None, Registry] = Projection(
    "registry", (REGISTRY, HEARTBEATS), lambda _: INITIAL, evolve, snapshot_version=1, evolve_all=evolve_all
)
"""Who is in the swarm and whether each agent is alive (the worker's `registry` table is its agents)."""


def _registered(view: AgentView | None, event: AgentRegistered) -> AgentView:
    at_ms = event.occurred_at
    if view is not None and (at_ms, event.event_id) <= (view.registered_at_ms, view.registration_id):
        return view
    return AgentView(
        agent_id=event.agent_id,
        capabilities=tuple(sorted(set(event.capabilities))),
        model=event.model,
        brain=event.brain,
        node=event.node,
        gpu=event.gpu,
        region=event.region,
        slot=event.slot,
        epoch=1 if view is None else view.epoch + 1,
        registration_id=event.event_id,
        registered_at_ms=at_ms,
        last_heartbeat_ms=at_ms,
    )


def _heartbeat(view: AgentView, event: AgentHeartbeat) -> AgentView:
    latest = max(view.last_heartbeat_ms, event.occurred_at)
    if event.sequence <= view.last_sequence:
        return view if latest == view.last_heartbeat_ms else replace(view, last_heartbeat_ms=latest)
    return replace(
        view,
        last_heartbeat_ms=latest,
        last_sequence=event.sequence,
        status=event.status,
        in_flight_task=event.in_flight_task,
    )
