"""decide: the events that answer a command on the coordinator's state (pure: time and ids come in the command)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from swarmlog.coordinator import agents, deadlock, missions, results, starts, voting
from swarmlog.coordinator.commands import Command, Decision, Rejected, Tick
from swarmlog.coordinator.dispatch import drain
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import State

Handler = Callable[[Draft, Mapping[str, Any]], "Rejected | None"]

_HANDLERS: dict[str, Handler] = {
    "MissionSubmitted": missions.on_submitted,
    "TaskStarted": starts.on_started,
    "TaskCompleted": results.on_completed,
    "TaskFailed": results.on_failed,
    "TaskReleased": results.on_released,
    "VoteCast": voting.on_vote_cast,
    "AgentRegistered": agents.on_registered,
    "AgentDeregistered": agents.on_deregistered,
    "AgentDeclaredDead": agents.on_declared_dead,
    "BudgetExceeded": agents.on_budget_exceeded,
    "BudgetRestored": agents.on_budget_restored,
    "DeadlockDetected": deadlock.on_detected,
}
INPUTS = frozenset(_HANDLERS)
"""The input event names decide takes (besides Tick)."""


def decide(command: Command, state: State) -> Decision | Rejected:
    """The events answering a command; deciding it again on the state that includes them emits nothing."""
    draft = Draft(state, command.cause_id, command.now_ms)
    if isinstance(command, Tick):
        missions.on_tick(draft, command.inputs_since_ms)
    else:
        event = command.event
        handler = _HANDLERS.get(event.name)
        if handler is None:
            return Rejected(f"the coordinator does not take {event.name} events; it takes {sorted(INPUTS)} and ticks")
        if _already_handled(state, event.data):
            return Decision()
        rejected = handler(draft, event.data)
        if rejected is not None:
            return rejected
    if draft.events:
        _follow_through(draft)
    return Decision(tuple(draft.events))


def _already_handled(state: State, data: Mapping[str, Any]) -> bool:
    """Whether the input already caused events of its mission (a redelivery)."""
    mission = state.missions.get(data.get("mission_id") or "")
    return mission is not None and data["event_id"] in mission.handled


def _follow_through(draft: Draft) -> None:
    """After the facts: drain the queue (oldest first), advance the missions touched, drain what they freed."""
    drain(draft)
    for mission_id in list(draft.touched):
        missions.advance(draft, mission_id)
    drain(draft)
