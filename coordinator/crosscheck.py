"""Cross-checking a replicated task: compare its replicas' outputs; break a tie with one more replica (EQUAL) or a
ballot among agents (VOTE) or of a judge agent (JUDGE); settle it."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from swarmlog.coordinator import consensus
from swarmlog.coordinator.ballot import ask_voters
from swarmlog.coordinator.dispatch import cancel, capable_elsewhere
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import (
    AGREED,
    BALLOT,
    CANCELLED,
    DISPUTED,
    DONE,
    EQUAL,
    FAILED,
    RUNNING,
    TIE_BREAK,
    VOTE,
    CrossCheck,
    MissionState,
    Replica,
    TaskSpec,
    cross_checked,
    task_ballot_id,
    workers,
)
from swarmlog.schemas import records
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
    first output (since the tie-breaker's start, in its round) with a quorum in. EQUAL: agreed on a strict majority,
    else one tie-breaker replica on another agent, else disputed. VOTE and JUDGE: agreed when all outputs agree, else
    a ballot among the replicas' agents (VOTE) or of one judge agent (JUDGE) chooses, closed by `close_ballot`.
    Replicas still running then are cancelled. A task whose ballot is open is closed here once its window passed."""
    mission = draft.state.missions[mission_id]
    spec = mission.tasks[task_id]
    if not cross_checked(spec) or mission.finished(task_id):
        return
    check = mission.checks.get(task_id)
    if check is not None and check.outcome == BALLOT:
        if draft.now_ms >= mission.task_ballots[task_id].deadline_at:
            close_ballot(draft, mission, task_id, timed_out=True)
        return
    replicas = {index: mission.replica(task_id, index) for index in range(spec.replicas)}
    done = {index: replica for index, replica in replicas.items() if replica.status == DONE}
    if not done:
        return
    since = check.at if check is not None else min(replica.done_at for replica in done.values())
    ended = all(replica.status in (DONE, FAILED, CANCELLED) for replica in replicas.values())
    quorum = check is not None or len(done) >= mission.consensus.quorum * spec.replicas
    timed_out = not ended and quorum and draft.now_ms - since >= mission.consensus.window_ms
    if not ended and not timed_out:
        return
    groups = compare({index: replica.output or "" for index, replica in done.items()})
    voters = _voters(draft, spec, done, replicas) if spec.check != EQUAL and len(groups) > 1 else ()
    if voters:
        _open_ballot(draft, mission, task_id, (groups, done), voters, timed_out=timed_out, since=since)
    else:
        outcome, chosen = _compared(draft, spec, check, groups, replicas)
        _checked(draft, mission, task_id, groups, done, outcome=outcome, timed_out=timed_out, since=since, **chosen)
    if timed_out:
        _cancel_late(draft, mission, task_id, replicas, len(done))


def _compared(
    draft: Draft, spec: TaskSpec, check: CrossCheck | None, groups: Groups, replicas: Mapping[int, Replica]
) -> tuple[str, dict[str, int]]:
    """What comparing alone decides, and its replica field: AGREED on a strict majority, else (EQUAL, first round) a
    tie-breaker on an agent that ran none of the task's replicas, else DISPUTED."""
    if majority(groups):
        return AGREED, {"replica": groups[0][0]}
    if (
        spec.check == EQUAL
        and check is None
        and capable_elsewhere(spec, draft.state.agents.values(), workers(replicas.values()))
    ):
        return TIE_BREAK, {"tie_breaker": spec.replicas}
    return DISPUTED, {"replica": groups[0][0]}


def _checked(
    draft: Draft,
    mission: MissionState,
    task_id: str,
    groups: Groups,
    done: Mapping[int, Replica],
    *,
    outcome: str,
    timed_out: bool,
    since: int,
    **fields: Any,
) -> None:
    """Journal a TaskCrossChecked of the task's done replicas, grouped; `since` is when the wait began (the task's first
    output, the tie-breaker's start, or the ballot's opening)."""
    waited = draft.now_ms - since
    draft.emit(
        TaskCrossChecked,
        mission.mission_id,
        mission_id=mission.mission_id,
        task_id=task_id,
        rule=mission.tasks[task_id].check,
        outcome=outcome,
        support=fields.pop("support", len(groups[0])),
        compared=[
            ComparedReplica(replica=index, agent_id=done[index].agent_id or "", group=number)
            for number, group in enumerate(groups)
            for index in group
        ],
        timed_out=timed_out,
        waited_ms=waited,
        **fields,
    )


def _voters(
    draft: Draft, spec: TaskSpec, done: Mapping[int, Replica], replicas: Mapping[int, Replica]
) -> tuple[str, ...]:
    """Who chooses among a VOTE or JUDGE task's outputs: the alive agents that gave them (VOTE), in replica order; or the
    one alive agent with the judge capability, one that did not work on the task first, then the least loaded (JUDGE)."""
    agents = draft.state.agents
    if spec.check == VOTE:
        gave = dict.fromkeys(replica.agent_id for replica in done.values() if replica.agent_id)
        return tuple(agent_id for agent_id in gave if agent_id in agents and agents[agent_id].alive)
    worked = workers(replicas.values())
    judges = [agent for agent in agents.values() if agent.alive and spec.judge in agent.capabilities]
    if not judges:
        return ()
    best = min(judges, key=lambda agent: (agent.agent_id in worked, len(agent.tasks) / agent.capacity, agent.agent_id))
    return (best.agent_id,)


def _open_ballot(
    draft: Draft,
    mission: MissionState,
    task_id: str,
    compared: tuple[Groups, Mapping[int, Replica]],
    voters: tuple[str, ...],
    *,
    timed_out: bool,
    since: int,
) -> None:
    """Journal the BALLOT check and ask each voter to choose among the distinct outputs (each group's earliest replica)
    within the consensus window."""
    groups, done = compared
    ballot_id = task_ballot_id(mission.mission_id, task_id)
    _checked(
        draft, mission, task_id, groups, done, outcome=BALLOT, timed_out=timed_out, since=since, ballot_id=ballot_id
    )
    candidates = [
        records.Candidate(f"{task_id}/{group[0]}", done[group[0]].agent_id or "", done[group[0]].output or "")
        for group in groups
    ]
    ask_voters(draft, mission, ballot_id, mission.tasks[task_id].prompt, candidates, voters)


def ballot_open(mission: MissionState, task_id: str) -> bool:
    """Whether the task's cross-check ballot is open (its latest check is BALLOT)."""
    check = mission.checks.get(task_id)
    return task_id in mission.task_ballots and check is not None and check.outcome == BALLOT


def on_task_vote(draft: Draft, mission_id: str, task_id: str) -> None:
    """After a vote on the task's ballot: close it once decided (see `consensus.decided`)."""
    mission = draft.state.missions[mission_id]
    if consensus.decided(mission.task_ballots[task_id], mission.consensus):
        close_ballot(draft, mission, task_id, timed_out=False)


def close_ballot(draft: Draft, mission: MissionState, task_id: str, *, timed_out: bool) -> None:
    """Settle the task on its ballot: agreed on the leader when it has more than half the votes (by the mission's
    strategy), else disputed on the leader, or on the largest group's earliest replica when no vote came."""
    ballot = mission.task_ballots[task_id]
    spec = mission.tasks[task_id]
    done = {
        index: replica for index in range(spec.replicas) if (replica := mission.replica(task_id, index)).status == DONE
    }
    groups = compare({index: replica.output or "" for index, replica in done.items()})
    lead = consensus.leader(ballot, mission.consensus.strategy)
    chosen = int(lead[0].candidate_id.rpartition("/")[2]) if lead else groups[0][0]
    _checked(
        draft,
        mission,
        task_id,
        groups,
        done,
        outcome=AGREED if lead and lead[1] > 0.5 else DISPUTED,
        since=ballot.opened_at,
        replica=chosen,
        support=sum(1 for candidate_id, _ in ballot.votes.values() if candidate_id == f"{task_id}/{chosen}"),
        ballot_id=ballot.ballot_id,
        votes=len(ballot.votes),
        timed_out=timed_out,
    )


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
