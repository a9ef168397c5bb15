"""Task starts: record that an agent started its running attempt; take back attempts it never started in time."""

from __future__ import annotations

from swarmlog.coordinator.dispatch import cancel, reassign
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import RUNNING, START_BACKOFF_MAX, Config, MissionState, Replica
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


def start_timeout_ms(config: Config, replica: Replica) -> int:
    """How long the replica's running attempt may go unstarted: the configured start timeout, doubled for each of its
    attempts taken back unstarted from an alive agent, up to START_BACKOFF_MAX times it.

    A swarm too busy to start a task within the timeout is as busy on the next agent: taking it back at a fixed
    interval cancels work about to start, and under load trades the task between agents for good (#13)."""
    return config.start_timeout_ms * min(1 << replica.slow_starts, START_BACKOFF_MAX)


def take_back_unstarted(draft: Draft, mission: MissionState, inputs_since_ms: int) -> None:
    """Cancel on its agent, and reassign, every running attempt not started within its start timeout (see
    `start_timeout_ms`) of its assignment (or of `inputs_since_ms`, when the coordinator could not read the start
    before then). Reads the mission's `unstarted` index, not every replica."""
    unstarted = sorted((task, index) for task in mission.unstarted for index in range(mission.tasks[task].replicas))
    for task_id, index in unstarted:
        replica = mission.replica(task_id, index)
        if replica.status != RUNNING or replica.started:
            continue
        timeout_ms = start_timeout_ms(draft.state.config, replica)
        if draft.now_ms - max(replica.assigned_at, inputs_since_ms) < timeout_ms:
            continue
        reason = f"not started within {timeout_ms} ms of its assignment to {replica.agent_id}"
        key = (mission.mission_id, task_id, index)
        cancel(draft, key, replica, reason)
        reassign(draft, key, replica.agent_id or "", reason)
