"""decide: the events that answer a command on the coordinator's state (pure: time and ids come in the command)."""

from __future__ import annotations

import dataclasses

from swarmlog.coordinator import agents, deadlock, missions, results, slots, starts, voting
from swarmlog.coordinator.commands import Command, Decision, Receive, Rejected, Tick
from swarmlog.coordinator.dispatch import drain
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDeregistered,
    AgentRegistered,
    BudgetExceeded,
    BudgetRestored,
    DeadlockDetected,
    MissionRejected,
    MissionSubmitted,
    SlotRequested,
    TaskCompleted,
    TaskFailed,
    TaskReleased,
    TaskStarted,
    VoteCast,
)

INPUTS: tuple[type[Event], ...] = (
    MissionSubmitted,
    TaskStarted,
    TaskCompleted,
    TaskFailed,
    TaskReleased,
    VoteCast,
    AgentRegistered,
    AgentDeregistered,
    AgentDeclaredDead,
    BudgetExceeded,
    BudgetRestored,
    DeadlockDetected,
    SlotRequested,
)
"""The input event classes decide takes (besides Tick)."""


def decide(command: Command, state: State) -> Decision | Rejected:
    """The events answering a command; deciding it again on the state that includes them emits nothing."""
    draft = Draft(state, command.cause_id, command.now_ms)
    if isinstance(command, Tick):
        missions.on_tick(draft, command.inputs_since_ms)
    else:
        event = command.event
        if not isinstance(event, INPUTS):
            names = sorted(kind.name for kind in INPUTS)
            return Rejected(f"the coordinator does not take {event.name} events; it takes {names} and ticks")
        if _already_handled(state, event):
            return Decision()
        rejected = _handle(draft, event)
        if rejected is not None:
            return rejected
    if draft.events:
        _follow_through(draft)
    return Decision(tuple(draft.events), draft.state if draft.events else None)


def decide_unrouted(command: Receive, state: State) -> Decision | Rejected:
    """The decision on an input with no replica routed (the next ticks route them, a decision's worth each): what the
    shell writes instead when the decision with its routing does not fit one journal write."""
    unrouted = dataclasses.replace(state, config=dataclasses.replace(state.config, max_routed_bytes=0))
    decision = decide(command, unrouted)
    if isinstance(decision, Rejected) or decision.state is None:
        return decision
    return Decision(decision.events, dataclasses.replace(decision.state, config=state.config))


def refuse(command: Receive, state: State, reason: str) -> Decision | Rejected:
    """The answer to an input whose decision cannot be written (the shell found it larger than one journal write): a
    submitted mission is rejected with the reason; any other input is Rejected (dead-lettered) with it."""
    event = command.event
    if not isinstance(event, MissionSubmitted):
        return Rejected(reason)
    draft = Draft(state, command.cause_id, command.now_ms)
    draft.emit(MissionRejected, event.mission_id, mission_id=event.mission_id, reason=reason)
    return Decision(tuple(draft.events), draft.state)


def _handle(draft: Draft, event: Event) -> Rejected | None:
    """Decide on one input event."""
    match event:
        case MissionSubmitted():
            missions.on_submitted(draft, event)
        case TaskStarted():
            starts.on_started(draft, event)
        case TaskCompleted():
            return results.on_completed(draft, event)
        case TaskFailed():
            return results.on_failed(draft, event)
        case TaskReleased():
            return results.on_released(draft, event)
        case VoteCast():
            return voting.on_vote_cast(draft, event)
        case AgentRegistered():
            agents.on_registered(draft, event)
        case AgentDeregistered():
            agents.on_deregistered(draft, event)
        case AgentDeclaredDead():
            agents.on_declared_dead(draft, event)
        case BudgetExceeded():
            agents.on_budget_exceeded(draft, event)
        case BudgetRestored():
            agents.on_budget_restored(draft, event)
        case DeadlockDetected():
            return deadlock.on_detected(draft, event)
        case SlotRequested():
            slots.on_requested(draft, event)
    return None


def _already_handled(state: State, event: Event) -> bool:
    """Whether the input already caused events of its mission (a redelivery)."""
    match event:
        case (
            MissionSubmitted(mission_id=mission_id)
            | TaskStarted(mission_id=mission_id)
            | TaskCompleted(mission_id=mission_id)
            | TaskFailed(mission_id=mission_id)
            | TaskReleased(mission_id=mission_id)
            | VoteCast(mission_id=mission_id)
        ):
            mission = state.missions.get(mission_id)
            return mission is not None and event.event_id in mission.handled
    return False


def _follow_through(draft: Draft) -> None:
    """After the facts: drain the queue (oldest first), advance the missions touched, drain what they freed."""
    drain(draft)
    for mission_id in list(draft.touched):
        missions.advance(draft, mission_id)
    drain(draft)
