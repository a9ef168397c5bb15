"""Task starts: record that an agent started its running attempt; take back attempts it never started in time."""

from __future__ import annotations

from swarmlog.coordinator.dispatch import cancel, reassign
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import RUNNING, MissionState
from swarmlog.schemas.records import TaskStarted, TaskStartRecorded


def on_started(draft: Draft, started: TaskStarted) -> None:
    """TaskStartRecorded for the running attempt the TaskStarted is about (once); any other start changes nothing."""
    mission = draft.state.missions.get(started.mission_id)
    if mission is None or not mission.active or started.task_id not in mission.tasks:
        return
    replica = mission.replica(started.task_id, started.replica)
    if (replica.status, replica.attempt, replica.agent_id, replica.started) != (
        RUNNING,
        started.attempt,
        started.agent_id,
        False,
    ):
        return
    draft.emit(
        TaskStartRecorded,
        mission.mission_id,
        mission_id=mission.mission_id,
        task_id=started.task_id,
        replica=started.replica,
        attempt=started.attempt,
        agent_id=started.agent_id,
    )


def take_back_unstarted(draft: Draft, mission: MissionState, inputs_since_ms: int) -> None:
    """Cancel on its agent, and reassign, every running attempt not started within the start timeout of its assignment
    (or of `inputs_since_ms`, when the coordinator could not read the start before then)."""
    timeout_ms = draft.state.config.start_timeout_ms
    for (task_id, index), replica in mission.replicas.items():
        waited_ms = draft.now_ms - max(replica.assigned_at, inputs_since_ms)
        if replica.status != RUNNING or replica.started or waited_ms < timeout_ms:
            continue
        reason = f"not started within {timeout_ms} ms of its assignment to {replica.agent_id}"
        key = (mission.mission_id, task_id, index)
        cancel(draft, key, replica, reason)
        reassign(draft, key, replica.agent_id or "", reason)
