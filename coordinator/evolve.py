"""evolve: the coordinator's state after one of its journal events (total, pure, copies only what changes), and
`PROJECTION`, the descriptor every fold of that state (the live coordinator, its recovery, replay, status) takes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Set
from typing import Any, Protocol

from swarmlog import topics
from swarmlog.coordinator import plan
from swarmlog.coordinator.state import (
    CANCELLED,
    COMPLETED,
    DEREGISTERED,
    DONE,
    FAILED,
    FRESH,
    MAX_ATTEMPTS,
    MISSION_FAILED,
    PENDING,
    QUEUED,
    RUNNING,
    TIE_BREAK,
    BallotTally,
    Candidate,
    Config,
    ConsensusSpec,
    CrossCheck,
    EnlistedAgent,
    MissionState,
    ReplicaKey,
    State,
    ballot_task,
    finished,
    initial,
    workers,
)
from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import (
    AgentDelisted,
    AgentEnlisted,
    AgentThrottleNoted,
    ConsensusReached,
    ConsensusTimedOut,
    DeadlockBroken,
    MissionAccepted,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    MissionRetired,
    PhaseStarted,
    PlanAdopted,
    SlotAllocated,
    SlotReleased,
    TaskAssigned,
    TaskCancelled,
    TaskCrossChecked,
    TaskQueued,
    TaskReassigned,
    TaskResultRecorded,
    TaskStartRecorded,
    VoteRecorded,
    VoteRequested,
)
from swarmlog.streams.persistent import PMap, PSet, replace


class ReplicaEvent(Protocol):
    """An event about one replica of one task."""

    @property
    def mission_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def replica(self) -> int: ...


def evolve(state: State, event: Event) -> State:
    """The state after a journal event; other kinds, and events about unknown missions or agents, change nothing."""
    if not _refers_to_known(state, event):
        return state
    after = _apply(state, event)
    return state if after is None else _note_handled(after, event)


def _refers_to_known(state: State, event: Event) -> bool:
    """Whether the mission or agent the event updates is in the state (the records that create them aside)."""
    if isinstance(event, AgentDelisted | AgentThrottleNoted):
        return event.agent_id in state.agents
    if isinstance(
        event,
        PhaseStarted
        | PlanAdopted
        | TaskQueued
        | TaskAssigned
        | TaskStartRecorded
        | TaskReassigned
        | TaskCancelled
        | TaskResultRecorded
        | TaskCrossChecked
        | VoteRequested
        | VoteRecorded
        | ConsensusReached
        | ConsensusTimedOut
        | MissionCompleted
        | MissionFailed
        | MissionRetired,
    ):
        return event.mission_id in state.missions
    return True


def _apply(state: State, event: Event) -> State | None:
    """The state after an event of a kind the coordinator journals, or None for any other kind."""
    match event:
        case MissionAccepted():
            return _accepted(state, event)
        case MissionRejected(mission_id=mission_id):
            return dataclasses.replace(state, rejected=state.rejected | {mission_id})
        case PhaseStarted(mission_id=mission_id, phase=phase):
            return _put(state, dataclasses.replace(state.missions[mission_id], phase=phase))
        case PlanAdopted():
            return _plan_adopted(state, event)
        case TaskQueued():
            return _queued(state, event)
        case TaskAssigned():
            return _assigned(state, event)
        case TaskStartRecorded():
            return _set_replica(state, event, started=True)
        case TaskReassigned():
            return _reassigned(state, event)
        case TaskCancelled():
            return _free(_set_replica(state, event, status=CANCELLED), event.agent_id, _key(event))
        case TaskResultRecorded():
            return _result(state, event)
        case TaskCrossChecked():
            return _cross_checked(state, event)
        case AgentEnlisted():
            return _enlisted(state, event)
        case AgentDelisted(agent_id=agent_id, occurred_at=at, reason=reason):
            goodbye = reason.startswith(DEREGISTERED)
            gone = dataclasses.replace(state.agents[agent_id], alive=False, delisted_at=at, goodbye=goodbye)
            return _put_agent(state, gone)
        case AgentThrottleNoted(agent_id=agent_id, throttled=throttled):
            return _put_agent(state, dataclasses.replace(state.agents[agent_id], throttled=throttled))
        case VoteRequested():
            return _vote_requested(state, event)
        case VoteRecorded():
            return _vote_recorded(state, event)
        case ConsensusReached(mission_id=mission_id) | ConsensusTimedOut(mission_id=mission_id):
            mission = state.missions[mission_id]
            decided = dataclasses.replace(mission, decision=event.output, consensus_ms=event.consensus_ms)
            return _put(state, decided)
        case MissionCompleted():
            return _ended(state, event.mission_id, COMPLETED, event.occurred_at)
        case MissionFailed():
            return _ended(state, event.mission_id, MISSION_FAILED, event.occurred_at)
        case MissionRetired(mission_id=mission_id):
            missions = {key: mission for key, mission in state.missions.items() if key != mission_id}
            return dataclasses.replace(state, missions=missions, retired=PSet(state.retired).add(mission_id))
        case SlotAllocated(agent_id=agent_id, slot=slot, causation_id=request):
            requests = state.slot_requests if request is None else {**state.slot_requests, agent_id: request}
            return dataclasses.replace(state, slots={**state.slots, agent_id: slot}, slot_requests=requests)
        case SlotReleased(agent_id=agent_id):
            slots = {key: held for key, held in state.slots.items() if key != agent_id}
            state = dataclasses.replace(state, slots=slots)  # its answered request stays: a redelivery is not answered
            known = state.agents.get(agent_id)
            return state if known is None else _put_agent(state, dataclasses.replace(known, released=True))
        case DeadlockBroken(wait_id=wait_id):
            return dataclasses.replace(state, broken_waits=state.broken_waits | {wait_id})
    return None


def _note_handled(state: State, event: Event) -> State:
    """Remember, on the event's mission, the input that caused it (redeliveries of it are then skipped)."""
    mission = state.missions.get(event.correlation_id or "")
    cause = event.causation_id
    if mission is None or cause is None or cause in mission.handled:
        return state
    return _put(state, replace(mission, handled=PSet(mission.handled).add(cause)))


def _put(state: State, mission: MissionState) -> State:
    """The state with one mission replaced."""
    return replace(state, missions={**state.missions, mission.mission_id: mission})


def _put_agent(state: State, agent: EnlistedAgent) -> State:
    """The state with one agent replaced (and filed in `idle` exactly when routing may give it a task)."""
    agents = PMap.of(state.agents).set(agent.agent_id, agent)
    return replace(state, agents=agents, idle=state.idle.put(agent))


def _key(event: ReplicaEvent) -> ReplicaKey:
    """The (mission, task, replica) an event is about."""
    return event.mission_id, event.task_id, event.replica


def _set_replica(state: State, event: ReplicaEvent, **changes: Any) -> State:
    """The state with one replica of one task changed."""
    mission = state.missions[event.mission_id]
    at = (event.task_id, event.replica)
    replica = replace(mission.replica(*at), **changes)
    return _put(state, _indexed(mission, (event.task_id,), replicas=PMap.of(mission.replicas).set(at, replica)))


def _indexed(mission: MissionState, task_ids: Iterable[str], **changes: Any) -> MissionState:
    """The mission with `changes` and its task indexes (pending, unfinished, failed_tasks, unstarted) brought up to
    date for these tasks, in one copy."""
    replicas, tasks = changes.get("replicas", mission.replicas), changes.get("tasks", mission.tasks)
    checks = changes.get("checks", mission.checks)
    pending, unfinished, failed = mission.pending, mission.unfinished, mission.failed_tasks
    unstarted = mission.unstarted
    for task_id in task_ids:
        statuses, waits_for_start = set(), False
        for index in range(tasks[task_id].replicas):
            replica = replicas.get((task_id, index), FRESH)
            statuses.add(replica.status)
            waits_for_start = waits_for_start or (replica.status == RUNNING and not replica.started)
        pending = _member(pending, task_id, PENDING in statuses)
        unfinished = _member(unfinished, task_id, not finished(tasks[task_id], statuses, checks.get(task_id)))
        failed = _member(failed, task_id, statuses <= {FAILED})
        unstarted = _member(unstarted, task_id, waits_for_start)
    return replace(mission, **changes, pending=pending, unfinished=unfinished, failed_tasks=failed, unstarted=unstarted)


def _member(tasks: Set[str], task_id: str, belongs: bool) -> PSet[str]:
    """`tasks` with `task_id` in it exactly when it belongs: persistent, so it costs O(log n), not a copy of them all."""
    held = tasks if isinstance(tasks, PSet) else PSet(tasks)
    return held.add(task_id) if belongs else held.discard(task_id)


def _free(state: State, agent_id: str, key: ReplicaKey) -> State:
    """The state with the agent no longer holding that task (if it did)."""
    agent = state.agents.get(agent_id)
    if agent is None or key not in agent.tasks:
        return state
    return _put_agent(state, dataclasses.replace(agent, tasks=agent.tasks - {key}))


def _unqueue(state: State, keep: Callable[[ReplicaKey], bool]) -> State:
    """The state with the queue entries that fail `keep` removed."""
    queue = tuple(key for key in state.queue if keep(key))
    return state if len(queue) == len(state.queue) else dataclasses.replace(state, queue=queue)


def _accepted(state: State, event: MissionAccepted) -> State:
    consensus = event.consensus
    mission = MissionState(
        mission_id=event.mission_id,
        title=event.title,
        submitted_at=event.submitted_at,
        deadline_at=event.deadline_at,
        token_budget=event.token_budget,
        consensus=ConsensusSpec(consensus.strategy, consensus.window_ms, consensus.quorum),
        tasks=plan.mission_tasks(event),
        pass_replicas=event.pass_replicas,
    )
    return _put(state, _indexed(mission, mission.tasks))


def _plan_adopted(state: State, event: PlanAdopted) -> State:
    mission = state.missions[event.mission_id]
    planned = {record.task_id: plan.from_record(record) for record in event.tasks}
    return _put(state, _indexed(mission, planned, tasks={**mission.tasks, **planned}))


def _queued(state: State, event: TaskQueued) -> State:
    state = _set_replica(state, event, status=QUEUED, attempt=event.attempt, agent_id=None)
    key = _key(event)
    return state if key in state.queue else dataclasses.replace(state, queue=(*state.queue, key))


def _assigned(state: State, event: TaskAssigned) -> State:
    key, agent_id = _key(event), event.agent_id
    state = _set_replica(
        state,
        event,
        status=RUNNING,
        attempt=event.attempt,
        agent_id=agent_id,
        assigned_at=event.occurred_at,
        started=False,
    )
    mission = state.missions[event.mission_id]
    if agent_id not in mission.agents:
        state = _put(state, dataclasses.replace(mission, agents=mission.agents | {agent_id}))
    agent = state.agents.get(agent_id)
    if agent is not None:
        state = _put_agent(state, dataclasses.replace(agent, tasks=agent.tasks | {key}, load=agent.load + 1))
    if key not in state.queue:
        return state
    at = state.queue.index(key)
    return dataclasses.replace(state, queue=state.queue[:at] + state.queue[at + 1 :])


def _reassigned(state: State, event: TaskReassigned) -> State:
    """The replica routes its next attempt; taken back unstarted from an agent still alive (a start timeout: a dead or
    deregistered agent is delisted before its task is reassigned), it counts as a slow start."""
    replica = state.missions[event.mission_id].replica(event.task_id, event.replica)
    agent = state.agents.get(event.from_agent_id)
    slow = not replica.started and agent is not None and agent.alive
    state = _set_replica(
        state,
        event,
        status=PENDING,
        agent_id=None,
        tried=replica.tried | {event.from_agent_id},
        slow_starts=replica.slow_starts + slow,
    )
    return _free(state, event.from_agent_id, _key(event))


def _result(state: State, event: TaskResultRecorded) -> State:
    if event.stale:
        return state
    mission = state.missions[event.mission_id]
    replica = mission.replica(event.task_id, event.replica)
    if event.succeeded:
        changes: dict[str, Any] = {"status": DONE, "output": event.output, "done_at": event.occurred_at}
    else:
        failures = replica.failures + 1
        changes = {
            "status": FAILED if failures >= MAX_ATTEMPTS else PENDING,
            "failures": failures,
            "tried": replica.tried | {event.agent_id},
        }
    state = _put(
        state,
        dataclasses.replace(
            mission,
            tokens=mission.tokens + event.tokens,
            completed=mission.completed + event.succeeded,
            failed=mission.failed + (not event.succeeded),
            malformed=mission.malformed + event.malformed,
        ),
    )
    return _free(_set_replica(state, event, **changes), event.agent_id, _key(event))


def _cross_checked(state: State, event: TaskCrossChecked) -> State:
    """Note the check; end the task's replicas waiting to be routed or queued (the running ones are cancelled by the
    events that follow it); a tie-breaker adds a replica that prefers agents the task has not had."""
    mission, task_id = state.missions[event.mission_id], event.task_id
    spec = mission.tasks[task_id]
    check = CrossCheck(event.outcome, event.replica, event.occurred_at)
    checks = {**mission.checks, task_id: check}
    tasks, replicas = mission.tasks, PMap.of(mission.replicas)
    waiting = [index for index in range(spec.replicas) if mission.replica(task_id, index).status in (PENDING, QUEUED)]
    for index in waiting:
        replicas = replicas.set((task_id, index), replace(mission.replica(task_id, index), status=CANCELLED))
    if event.outcome == TIE_BREAK:
        index = max(spec.replicas, event.tie_breaker or 0)
        tasks = {**tasks, task_id: dataclasses.replace(spec, replicas=index + 1)}
        others = workers(mission.replica(task_id, other) for other in range(spec.replicas))
        replicas = replicas.set((task_id, index), dataclasses.replace(FRESH, tried=others))
    state = _put(state, _indexed(mission, (task_id,), tasks=tasks, replicas=replicas, checks=checks))
    if not waiting:
        return state
    ended = {(event.mission_id, task_id, index) for index in waiting}
    return _unqueue(state, lambda queued: queued not in ended)


def _enlisted(state: State, event: AgentEnlisted) -> State:
    known = state.agents.get(event.agent_id) or EnlistedAgent(event.agent_id, event.region, event.slot, frozenset())
    return _put_agent(
        state,
        dataclasses.replace(
            known,
            region=event.region,
            slot=event.slot,
            capabilities=frozenset(event.capabilities),
            model=event.model,
            alive=True,
            capacity=event.capacity,
            delisted_at=None,
            goodbye=False,
            released=False,
        ),
    )


def _vote_requested(state: State, event: VoteRequested) -> State:
    """Add the voter to its ballot (the mission's, or a task's cross-check), opened by its first VoteRequested."""
    mission = state.missions[event.mission_id]
    task_id = ballot_task(mission.mission_id, event.ballot_id)
    ballot = (mission.ballot if task_id is None else mission.task_ballots.get(task_id)) or BallotTally(
        ballot_id=event.ballot_id,
        candidates=tuple(Candidate(c.candidate_id, c.agent_id, c.output) for c in event.candidates),
        opened_at=event.occurred_at,
        deadline_at=event.deadline_at,
    )
    ballot = dataclasses.replace(ballot, voters=(*ballot.voters, event.voter_agent_id))
    return _put(state, _with_ballot(mission, task_id, ballot))


def _vote_recorded(state: State, event: VoteRecorded) -> State:
    """Count the vote in its ballot."""
    mission = state.missions[event.mission_id]
    task_id = ballot_task(mission.mission_id, event.ballot_id)
    ballot = mission.ballot if task_id is None else mission.task_ballots.get(task_id)
    if ballot is None:
        return state
    votes = {**ballot.votes, event.voter_agent_id: (event.candidate_id, event.confidence)}
    return _put(state, _with_ballot(mission, task_id, dataclasses.replace(ballot, votes=votes)))


def _with_ballot(mission: MissionState, task_id: str | None, ballot: BallotTally) -> MissionState:
    """The mission holding this ballot: its own (no task), or the task's cross-check ballot."""
    if task_id is None:
        return dataclasses.replace(mission, ballot=ballot)
    return dataclasses.replace(mission, task_ballots={**mission.task_ballots, task_id: ballot})


def _ended(state: State, mission_id: str, phase: str, at_ms: int) -> State:
    ended = dataclasses.replace(state.missions[mission_id], phase=phase, ended_at=at_ms)
    return _unqueue(_put(state, ended), lambda queued: queued[0] != mission_id)


PROJECTION: Projection[Config, State] = Projection(
    name="coordinator",
    topics=(topics.JOURNAL,),
    initial=initial,
    evolve=evolve,
    snapshot_version=1,
)
"""One region's coordinator: the fold of its journal partition. Bump `snapshot_version` when `evolve` gives an old
snapshot's state another meaning (its fields' layout is checked on its own: `coordinator.shell.folded`)."""
