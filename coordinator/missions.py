"""A mission's life: accept it, move it through PLANNING, WORK, CONSENSUS and FINAL, and end it."""

from __future__ import annotations

from collections.abc import Set
from typing import Any

from swarmlog.coordinator import crosscheck, placement, plan, slots, starts, voting
from swarmlog.coordinator.dispatch import cancel, output, route
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import (
    FINAL_TASK,
    MAX_ATTEMPTS,
    PENDING,
    PLAN_TASK,
    RUNNING,
    Config,
    MissionState,
    TaskSpec,
)
from swarmlog.schemas.records import (
    MissionAccepted,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    MissionRetired,
    MissionSubmitted,
    PhaseStarted,
    PlanAdopted,
)

_KIND = {"PLANNING": "PLAN", "WORK": "WORK", "FINAL": "FINAL"}


def on_submitted(draft: Draft, event: MissionSubmitted) -> None:
    """Accept (or reject) a mission this region owns: the region it names, else the one its id hashes to."""
    mission_id, config = event.mission_id, draft.state.config
    if draft.state.known(mission_id):
        return
    region = event.region
    if region == placement.TOP:
        return  # the top level's, to split across the regions
    if (region if region in config.regions else placement.owner(mission_id, config.regions)) != config.region:
        return
    reason = _invalid(event, config)
    if reason:
        draft.emit(MissionRejected, mission_id, mission_id=mission_id, reason=reason)
        return
    submitted_at, deadline = event.occurred_at, event.deadline_ms
    draft.emit(
        MissionAccepted,
        mission_id,
        mission_id=mission_id,
        region=config.region,
        title=event.title,
        submitted_at=submitted_at,
        tasks=[plan.to_record(plan.from_record(task)) for task in event.tasks],
        planning=event.planning,
        consensus=event.consensus,
        final_action=event.final_action,
        deadline_at=None if deadline is None else submitted_at + deadline,
        token_budget=event.token_budget,
        pass_replicas=event.pass_replicas,
    )
    draft.emit(
        PhaseStarted, mission_id, mission_id=mission_id, phase="PLANNING" if event.planning is not None else "WORK"
    )


def _invalid(event: MissionSubmitted, config: Config) -> str | None:
    """Why a submitted mission cannot run, or None."""
    region, tasks, planning = event.region, event.tasks, event.planning
    if region is not None and region not in config.regions:
        return f"unknown region {region!r}; the regions are {list(config.regions)}"
    if bool(tasks) == (planning is not None):
        return "a mission needs either explicit tasks or a planning step, not both and not neither"
    spec = event.consensus
    if not 0 < spec.quorum <= 1 or spec.window_ms < 0:
        return f"consensus needs 0 < quorum <= 1 and window_ms >= 0; got {spec}"
    return plan.problem([plan.from_record(task) for task in tasks]) if tasks else None


def on_tick(draft: Draft, inputs_since_ms: int = 0) -> None:
    """Fail missions past their deadline, time out closed consensus windows (a task's cross-check, the mission's
    ballot), take back attempts never started, route ready replicas a full decision left, retire missions ended longer
    ago than the retention, and release the slots of agents delisted longer than the slot retention."""
    slots.release_due(draft)
    for mission in list(draft.state.missions.values()):
        if not mission.active:
            _retire_if_due(draft, mission)
        elif mission.deadline_at is not None and draft.now_ms >= mission.deadline_at:
            fail(draft, mission, f"deadline passed at {mission.deadline_at} ms ({mission.phase} phase)")
        else:
            starts.take_back_unstarted(draft, mission, inputs_since_ms)
            if mission.phase == "WORK":
                crosscheck.settle_due(draft, mission.mission_id, mission.unfinished)
            elif mission.phase == "CONSENSUS":
                voting.close_if_expired(draft, draft.state.missions[mission.mission_id])
            _route_left_over(draft, mission.mission_id)


def _route_left_over(draft: Draft, mission_id: str) -> None:
    """Route the ready replicas a decision left unrouted because it was full (Config.max_routed_bytes)."""
    mission = draft.state.missions[mission_id]
    if mission.active and mission.phase in _KIND and mission.pending:
        advance(draft, mission_id)


def _retire_if_due(draft: Draft, mission: MissionState) -> None:
    """MissionRetired once the ended mission has been kept for the retention."""
    ended_at = mission.ended_at if mission.ended_at is not None else mission.submitted_at
    if draft.now_ms - ended_at >= draft.state.config.retain_ended_ms:
        draft.emit(MissionRetired, mission.mission_id, mission_id=mission.mission_id, ended_at=ended_at)


def advance(draft: Draft, mission_id: str) -> None:
    """Move a mission as far as its recorded facts allow: route ready replicas, change phase, or end it."""
    while (mission := draft.state.missions.get(mission_id)) is not None and mission.active:
        emitted = len(draft.events)
        _step(draft, mission)
        if len(draft.events) == emitted:
            return


def _step(draft: Draft, mission: MissionState) -> None:
    """One look at the mission in its current phase."""
    if mission.token_budget is not None and mission.tokens > mission.token_budget:
        fail(draft, mission, f"token budget exceeded: used {mission.tokens} of {mission.token_budget}")
    elif mission.phase == "CONSENSUS":
        _after_consensus(draft, mission)
    elif mission.phase in _KIND:
        _run_phase(draft, mission, _KIND[mission.phase])


def _run_phase(draft: Draft, mission: MissionState, kind: str) -> None:
    """Cross-check the replicated tasks this decision made due, fail on a task that failed for good, finish the phase
    when all are done, else route what is ready. Reads the mission's task indexes (`pending`, `unfinished`,
    `failed_tasks`) and the decision's events, so a decision costs what is waiting, not every task of the mission."""
    if kind == "WORK" and crosscheck.settle_due(
        draft, mission.mission_id, crosscheck.touched(draft, mission.mission_id)
    ):
        return
    failed = _in_order(mission, kind, mission.failed_tasks)
    if failed:
        fail(draft, mission, f"task {failed[0].task_id!r} failed on every replica ({MAX_ATTEMPTS} attempts each)")
        return
    if not any(mission.tasks[task_id].kind == kind for task_id in mission.unfinished):
        _finish_phase(draft, mission)
        return
    budget = draft.state.config.max_routed_bytes
    for spec in _in_order(mission, kind, mission.pending):
        if all(mission.finished(dep) for dep in spec.depends_on):
            for index in range(spec.replicas):
                if draft.routed_bytes >= budget:
                    return  # the decision is full: the next tick routes the rest
                if mission.replica(spec.task_id, index).status == PENDING:
                    route(draft, mission.mission_id, spec, index)


def _in_order(mission: MissionState, kind: str, task_ids: Set[str]) -> list[TaskSpec]:
    """The specs of `kind` among `task_ids`, in the mission's task order."""
    if not any(mission.tasks[task_id].kind == kind for task_id in task_ids):
        return []
    return [spec for spec in mission.tasks.values() if spec.kind == kind and spec.task_id in task_ids]


def _finish_phase(draft: Draft, mission: MissionState) -> None:
    """PLANNING adopts its plan (or fails), WORK opens consensus, FINAL completes the mission."""
    mission_id = mission.mission_id
    if mission.phase == "PLANNING":
        planned = plan.parse(output(mission, PLAN_TASK) or "")
        if isinstance(planned, str):
            fail(draft, mission, f"invalid plan: {planned}")
        else:
            tasks = [plan.to_record(spec) for spec in planned]
            draft.emit(PlanAdopted, mission_id, mission_id=mission_id, tasks=tasks)
            draft.emit(PhaseStarted, mission_id, mission_id=mission_id, phase="WORK")
    elif mission.phase == "WORK":
        draft.emit(PhaseStarted, mission_id, mission_id=mission_id, phase="CONSENSUS")
    else:
        _complete(draft, mission, [output(mission, FINAL_TASK) or ""])


def _after_consensus(draft: Draft, mission: MissionState) -> None:
    """Open the ballot; once decided, start FINAL, or complete when the mission has no final action."""
    if mission.decision is None:
        if mission.ballot is None:
            voting.open_ballot(draft, mission)
    elif FINAL_TASK in mission.tasks:
        draft.emit(PhaseStarted, mission.mission_id, mission_id=mission.mission_id, phase="FINAL")
    else:
        _complete(draft, mission, [mission.decision])


def fail(draft: Draft, mission: MissionState, reason: str) -> None:
    """Cancel its running attempts and emit MissionFailed."""
    _end(draft, mission, MissionFailed, f"mission failed: {reason}", reason=reason, outputs=[])


def _complete(draft: Draft, mission: MissionState, outputs: list[str]) -> None:
    """Emit MissionCompleted."""
    _end(draft, mission, MissionCompleted, "mission completed", success=True, outputs=outputs)


def _end(
    draft: Draft, mission: MissionState, kind: type[MissionCompleted | MissionFailed], cancel_reason: str, **fields: Any
) -> None:
    """Cancel the mission's running attempts, then emit its final event with the mission's counters."""
    mission_id = mission.mission_id
    for (task_id, index), replica in mission.replicas.items():
        if replica.status == RUNNING:
            cancel(draft, (mission_id, task_id, index), replica, cancel_reason)
    draft.emit(
        kind,
        mission_id,
        mission_id=mission_id,
        latency_ms=draft.now_ms - mission.submitted_at,
        agent_count=len(mission.agents),
        tasks_completed=mission.completed,
        tasks_failed=mission.failed,
        malformed_count=mission.malformed,
        consensus_ms=mission.consensus_ms,
        tokens_used=mission.tokens,
        **fields,
    )
