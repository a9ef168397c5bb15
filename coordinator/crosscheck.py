"""Cross-checking a replicated task: compare its replicas' outputs, break a tie with one more replica, settle it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from swarmlog.coordinator.dispatch import cancel, capable_elsewhere
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import (
    AGREED,
    CANCELLED,
    DISPUTED,
    DONE,
    FAILED,
    RUNNING,
    TIE_BREAK,
    MissionState,
    Replica,
    cross_checked,
    workers,
)
from swarmlog.schemas.records import ComparedReplica, TaskCrossChecked

Groups = tuple[tuple[int, ...], ...]
"""Replica indexes grouped by normalised output: the largest group first, then the one with the earliest replica."""


def normalise(output: str) -> str:
    """The output as compared: whitespace collapsed and casefolded; a JSON object or array canonicalised (sorted keys,
    no spaces, its strings folded the same way)."""
    folded = _fold(output)
    try:
        value = json.loads(folded, parse_constant=_no_constant)
        if isinstance(value, dict | list):
            return json.dumps(_fold_strings(value), sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (ValueError, RecursionError):
        pass
    return folded


def _fold(text: str) -> str:
    """Text stripped, its whitespace runs collapsed to one space, casefolded."""
    return " ".join(text.split()).casefold()


def _no_constant(name: str) -> None:
    """Refuse NaN and Infinity (not JSON): such an output is compared as text."""
    raise ValueError(f"{name} is not JSON")


def _fold_strings(value: Any) -> Any:
    """A parsed JSON value with every string in it (keys too) folded."""
    if isinstance(value, str):
        return _fold(value)
    if isinstance(value, list):
        return [_fold_strings(item) for item in value]
    if isinstance(value, dict):
        return {_fold(key): _fold_strings(item) for key, item in value.items()}
    return value


def compare(outputs: Mapping[int, str]) -> Groups:
    """The replicas grouped by normalised output, largest group first, ties to the group of the earliest replica."""
    by_output: dict[str, list[int]] = {}
    for index in sorted(outputs):
        by_output.setdefault(normalise(outputs[index]), []).append(index)
    return tuple(sorted((tuple(group) for group in by_output.values()), key=lambda group: (-len(group), group[0])))


def majority(groups: Groups) -> bool:
    """Whether the leading group holds a strict majority of the replicas compared."""
    return 2 * len(groups[0]) > sum(len(group) for group in groups)


def settle_due(draft: Draft, mission_id: str, task_ids: Iterable[str]) -> bool:
    """Compare each of these tasks of the mission that is due (see `settle`); whether any was compared."""
    emitted = len(draft.events)
    for task_id in sorted(set(task_ids) & draft.state.missions[mission_id].unfinished):
        settle(draft, mission_id, task_id)
    return len(draft.events) > emitted


def touched(draft: Draft, mission_id: str) -> set[str]:
    """The tasks of the mission the decision's events so far are about: the only ones a fact can have made due (a
    window that passes is a tick's)."""
    return {event.task_id for event in draft.events if event.mission_id == mission_id and event.task_id is not None}


def settle(draft: Draft, mission_id: str, task_id: str) -> None:
    """Compare a replicated task's outputs once every replica ended, or once the consensus window passed since its
    first output (since the tie-breaker's start, in its round) with a quorum in: agreed on a strict majority, else one
    tie-breaker replica on another agent, else disputed. Replicas still running then are cancelled."""
    mission = draft.state.missions[mission_id]
    spec = mission.tasks[task_id]
    if not cross_checked(spec) or mission.finished(task_id):
        return
    replicas = {index: mission.replica(task_id, index) for index in range(spec.replicas)}
    done = {index: replica for index, replica in replicas.items() if replica.status == DONE}
    if not done:
        return
    check = mission.checks.get(task_id)
    since = check.at if check is not None else min(replica.done_at for replica in done.values())
    ended = all(replica.status in (DONE, FAILED, CANCELLED) for replica in replicas.values())
    quorum = check is not None or len(done) >= mission.consensus.quorum * spec.replicas
    timed_out = not ended and quorum and draft.now_ms - since >= mission.consensus.window_ms
    if not ended and not timed_out:
        return
    groups = compare({index: replica.output or "" for index, replica in done.items()})
    if majority(groups):
        outcome = AGREED
    elif check is None and capable_elsewhere(spec, draft.state.agents.values(), workers(replicas.values())):
        outcome = TIE_BREAK
    else:
        outcome = DISPUTED
    draft.emit(
        TaskCrossChecked,
        mission_id,
        mission_id=mission_id,
        task_id=task_id,
        rule="EQUAL",
        outcome=outcome,
        replica=None if outcome == TIE_BREAK else groups[0][0],
        support=len(groups[0]),
        compared=[
            ComparedReplica(replica=index, agent_id=done[index].agent_id or "", group=number)
            for number, group in enumerate(groups)
            for index in group
        ],
        tie_breaker=spec.replicas if outcome == TIE_BREAK else None,
        timed_out=timed_out,
        waited_ms=draft.now_ms - since,
    )
    if timed_out:
        _cancel_late(draft, mission, task_id, replicas, len(done))


def _cancel_late(
    draft: Draft, mission: MissionState, task_id: str, replicas: Mapping[int, Replica], arrived: int
) -> None:
    """Cancel, on its agent, each replica still running when the window closed the comparison."""
    reason = (
        f"cross-checked without it: the consensus window ({mission.consensus.window_ms} ms) passed with "
        f"{arrived} of {len(replicas)} replicas in"
    )
    for index, replica in replicas.items():
        if replica.status == RUNNING:
            cancel(draft, (mission.mission_id, task_id, index), replica, reason)
