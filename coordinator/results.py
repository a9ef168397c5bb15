"""Task results from agents: record the running attempt's, mark a superseded one's stale, take released ones back."""

from __future__ import annotations

from typing import Any

from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.dispatch import reassign
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import RUNNING, MissionState, Replica
from swarmlog.schemas.records import TaskCompleted, TaskFailed, TaskReleased, TaskResultRecorded

AttemptEvent = TaskCompleted | TaskFailed | TaskReleased
"""An agent's word on one attempt of one replica."""


def on_completed(draft: Draft, event: TaskCompleted) -> Rejected | None:
    """Record a TaskCompleted."""
    return _record(draft, event, succeeded=True, output=event.output, malformed=False, tokens=_tokens(event))


def on_failed(draft: Draft, event: TaskFailed) -> Rejected | None:
    """Record a TaskFailed and the tokens its attempt spent (the mission retries it on another agent)."""
    malformed = event.failure == "MALFORMED_OUTPUT"
    return _record(draft, event, succeeded=False, output=None, malformed=malformed, tokens=_tokens(event))


def on_released(draft: Draft, event: TaskReleased) -> Rejected | None:
    """Take back an attempt its agent handed back unfinished."""
    found = _replica(draft, event)
    if not isinstance(found, Replica):
        return found
    if _current(found, event):
        key = (event.mission_id, event.task_id, event.replica)
        reassign(draft, key, event.agent_id, f"released: {event.reason}")
    return None


def _tokens(event: TaskCompleted | TaskFailed) -> int:
    """The tokens an attempt spent (both counts default to 0 in the schemas)."""
    return event.prompt_tokens + event.completion_tokens


def _record(draft: Draft, event: TaskCompleted | TaskFailed, **result: Any) -> Rejected | None:
    """TaskResultRecorded for the running attempt, stale for an older one; a duplicate records nothing."""
    found = _replica(draft, event)
    if not isinstance(found, Replica):
        return found
    current = _current(found, event)
    if current or event.attempt < found.attempt:
        mission_id = event.mission_id
        draft.emit(
            TaskResultRecorded,
            mission_id,
            mission_id=mission_id,
            task_id=event.task_id,
            replica=event.replica,
            attempt=event.attempt,
            agent_id=event.agent_id,
            latency_ms=event.latency_ms,
            stale=not current,
            **result,
        )
    return None


def _replica(draft: Draft, event: AttemptEvent) -> Replica | Rejected | None:
    """The replica a task event is about; None for a mission this region does not run (or no longer runs)."""
    mission: MissionState | None = draft.state.missions.get(event.mission_id)
    if mission is None or not mission.active:
        return None
    spec = mission.tasks.get(event.task_id)
    if spec is None or not 0 <= event.replica < spec.replicas:
        return Rejected(
            f"mission {event.mission_id} has no task {event.task_id!r} replica {event.replica}; "
            "the agent reported on a task it was never assigned"
        )
    return mission.replica(event.task_id, event.replica)


def _current(replica: Replica, event: AttemptEvent) -> bool:
    """Whether the event is about the replica's running attempt on that agent."""
    return replica.status == RUNNING and replica.attempt == event.attempt and replica.agent_id == event.agent_id
