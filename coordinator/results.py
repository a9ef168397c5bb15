"""Task results from agents: record the running attempt's, mark a superseded one's stale, take released ones back."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.dispatch import reassign
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import RUNNING, Mission, Replica

Data = Mapping[str, Any]


def on_completed(draft: Draft, data: Data) -> Rejected | None:
    """Record a TaskCompleted."""
    return _record(draft, data, succeeded=True, output=data["output"], malformed=False, tokens=_tokens(data))


def on_failed(draft: Draft, data: Data) -> Rejected | None:
    """Record a TaskFailed and the tokens its attempt spent (the mission retries it on another agent)."""
    return _record(
        draft, data, succeeded=False, output=None, malformed=data["failure"] == "MALFORMED_OUTPUT", tokens=_tokens(data)
    )


def on_released(draft: Draft, data: Data) -> Rejected | None:
    """Take back an attempt its agent handed back unfinished."""
    found = _replica(draft, data)
    if not isinstance(found, Replica):
        return found
    if _current(found, data):
        key = (data["mission_id"], data["task_id"], data["replica"])
        reassign(draft, key, data["agent_id"], f"released: {data['reason']}")
    return None


def _tokens(data: Data) -> int:
    """The tokens an attempt spent (both counts default to 0 in the schemas)."""
    return data.get("prompt_tokens", 0) + data.get("completion_tokens", 0)


def _record(draft: Draft, data: Data, **result: Any) -> Rejected | None:
    """TaskResultRecorded for the running attempt, stale for an older one; a duplicate records nothing."""
    found = _replica(draft, data)
    if not isinstance(found, Replica):
        return found
    current = _current(found, data)
    if current or data["attempt"] < found.attempt:
        mission_id = data["mission_id"]
        draft.emit(
            "TaskResultRecorded",
            mission_id,
            mission_id=mission_id,
            task_id=data["task_id"],
            replica=data["replica"],
            attempt=data["attempt"],
            agent_id=data["agent_id"],
            latency_ms=data.get("latency_ms", 0),
            stale=not current,
            **result,
        )
    return None


def _replica(draft: Draft, data: Data) -> Replica | Rejected | None:
    """The replica a task event is about; None for a mission this region does not run (or no longer runs)."""
    mission: Mission | None = draft.state.missions.get(data["mission_id"])
    if mission is None or not mission.active:
        return None
    spec = mission.tasks.get(data["task_id"])
    if spec is None or not 0 <= data["replica"] < spec.replicas:
        return Rejected(
            f"mission {data['mission_id']} has no task {data['task_id']!r} replica {data['replica']}; "
            "the agent reported on a task it was never assigned"
        )
    return mission.replica(data["task_id"], data["replica"])


def _current(replica: Replica, data: Data) -> bool:
    """Whether the event is about the replica's running attempt on that agent."""
    return replica.status == RUNNING and replica.attempt == data["attempt"] and replica.agent_id == data["agent_id"]
