"""evolve: the coordinator's state after one of its journal events (total, pure, copies only what changes)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from swarmlog.coordinator import plan
from swarmlog.coordinator.state import (
    CANCELLED,
    COMPLETED,
    DONE,
    FAILED,
    MAX_ATTEMPTS,
    MISSION_FAILED,
    PENDING,
    QUEUED,
    RUNNING,
    Agent,
    Ballot,
    Candidate,
    ConsensusSpec,
    Mission,
    State,
    TaskKey,
)
from swarmlog.schemas.events import Event, to_millis
from swarmlog.streams.persistent import PSet

Data = Mapping[str, Any]


def evolve(state: State, event: Event) -> State:
    """The state after a journal event; other kinds, and events about unknown missions or agents, change nothing."""
    apply = _APPLY.get(event.name)
    if apply is None or not _refers_to_known(state, event):
        return state
    return _note_handled(apply(state, event.data), event.data)


def _refers_to_known(state: State, event: Event) -> bool:
    """Whether the mission or agent the event updates is in the state (the records that create them aside)."""
    if event.name in _ABOUT_MISSION:
        return event.data["mission_id"] in state.missions
    if event.name in _ABOUT_AGENT:
        return event.data["agent_id"] in state.agents
    return True


def _note_handled(state: State, data: Data) -> State:
    """Remember, on the event's mission, the input that caused it (redeliveries of it are then skipped)."""
    mission = state.missions.get(data.get("correlation_id") or "")
    cause = data.get("causation_id")
    if mission is None or cause is None or cause in mission.handled:
        return state
    return _put(state, dataclasses.replace(mission, handled=mission.handled | {cause}))


def _put(state: State, mission: Mission) -> State:
    """The state with one mission replaced."""
    return dataclasses.replace(state, missions={**state.missions, mission.mission_id: mission})


def _put_agent(state: State, agent: Agent) -> State:
    """The state with one agent replaced."""
    return dataclasses.replace(state, agents={**state.agents, agent.agent_id: agent})


def _key(data: Data) -> TaskKey:
    """The (mission, task, replica) an event is about."""
    return data["mission_id"], data["task_id"], data["replica"]


def _set_replica(state: State, data: Data, **changes: Any) -> State:
    """The state with one replica of one task changed."""
    mission = state.missions[data["mission_id"]]
    at = (data["task_id"], data["replica"])
    replica = dataclasses.replace(mission.replica(*at), **changes)
    return _put(state, dataclasses.replace(mission, replicas={**mission.replicas, at: replica}))


def _free(state: State, agent_id: str, key: TaskKey) -> State:
    """The state with the agent no longer holding that task (if it did)."""
    agent = state.agents.get(agent_id)
    if agent is None or agent.task != key:
        return state
    return _put_agent(state, dataclasses.replace(agent, task=None))


def _unqueue(state: State, keep: Callable[[TaskKey], bool]) -> State:
    """The state with the queue entries that fail `keep` removed."""
    queue = tuple(key for key in state.queue if keep(key))
    return state if len(queue) == len(state.queue) else dataclasses.replace(state, queue=queue)


def _accepted(state: State, data: Data) -> State:
    consensus = data.get("consensus") or {}
    deadline = data.get("deadline_at")
    return _put(
        state,
        Mission(
            mission_id=data["mission_id"],
            title=data["title"],
            submitted_at=to_millis(data["submitted_at"]),
            deadline_at=None if deadline is None else to_millis(deadline),
            token_budget=data.get("token_budget"),
            consensus=ConsensusSpec(**consensus),
            tasks=plan.mission_tasks(data),
        ),
    )


def _rejected(state: State, data: Data) -> State:
    return dataclasses.replace(state, rejected=state.rejected | {data["mission_id"]})


def _phase_started(state: State, data: Data) -> State:
    return _put(state, dataclasses.replace(state.missions[data["mission_id"]], phase=data["phase"]))


def _plan_adopted(state: State, data: Data) -> State:
    mission = state.missions[data["mission_id"]]
    planned = {record["task_id"]: plan.from_record(record) for record in data["tasks"]}
    return _put(state, dataclasses.replace(mission, tasks={**mission.tasks, **planned}))


def _queued(state: State, data: Data) -> State:
    state = _set_replica(state, data, status=QUEUED, attempt=data["attempt"], agent_id=None)
    key = _key(data)
    return state if key in state.queue else dataclasses.replace(state, queue=(*state.queue, key))


def _assigned(state: State, data: Data) -> State:
    key, agent_id = _key(data), data["agent_id"]
    state = _set_replica(
        state,
        data,
        status=RUNNING,
        attempt=data["attempt"],
        agent_id=agent_id,
        assigned_at=to_millis(data["occurred_at"]),
        started=False,
    )
    mission = state.missions[data["mission_id"]]
    if agent_id not in mission.agents:
        state = _put(state, dataclasses.replace(mission, agents=mission.agents | {agent_id}))
    agent = state.agents.get(agent_id)
    if agent is not None:
        state = _put_agent(state, dataclasses.replace(agent, task=key, load=agent.load + 1))
    return _unqueue(state, lambda queued: queued != key)


def _start_recorded(state: State, data: Data) -> State:
    return _set_replica(state, data, started=True)


def _reassigned(state: State, data: Data) -> State:
    replica = state.missions[data["mission_id"]].replica(data["task_id"], data["replica"])
    state = _set_replica(state, data, status=PENDING, agent_id=None, tried=replica.tried | {data["from_agent_id"]})
    return _free(state, data["from_agent_id"], _key(data))


def _cancelled(state: State, data: Data) -> State:
    return _free(_set_replica(state, data, status=CANCELLED), data["agent_id"], _key(data))


def _result(state: State, data: Data) -> State:
    if data.get("stale"):
        return state
    mission = state.missions[data["mission_id"]]
    replica = mission.replica(data["task_id"], data["replica"])
    if data["succeeded"]:
        changes: dict[str, Any] = {"status": DONE, "output": data.get("output")}
    else:
        failures = replica.failures + 1
        changes = {
            "status": FAILED if failures >= MAX_ATTEMPTS else PENDING,
            "failures": failures,
            "tried": replica.tried | {data["agent_id"]},
        }
    state = _put(
        state,
        dataclasses.replace(
            mission,
            tokens=mission.tokens + data.get("tokens", 0),
            completed=mission.completed + bool(data["succeeded"]),
            failed=mission.failed + (not data["succeeded"]),
            malformed=mission.malformed + bool(data.get("malformed")),
        ),
    )
    return _free(_set_replica(state, data, **changes), data["agent_id"], _key(data))


def _enlisted(state: State, data: Data) -> State:
    known = state.agents.get(data["agent_id"]) or Agent(data["agent_id"], data["region"], data["slot"], frozenset())
    return _put_agent(
        state,
        dataclasses.replace(
            known,
            region=data["region"],
            slot=data["slot"],
            capabilities=frozenset(data.get("capabilities", ())),
            model=data.get("model", ""),
            alive=True,
        ),
    )


def _delisted(state: State, data: Data) -> State:
    return _put_agent(state, dataclasses.replace(state.agents[data["agent_id"]], alive=False))


def _throttle_noted(state: State, data: Data) -> State:
    return _put_agent(state, dataclasses.replace(state.agents[data["agent_id"]], throttled=data["throttled"]))


def _vote_requested(state: State, data: Data) -> State:
    mission = state.missions[data["mission_id"]]
    ballot = mission.ballot or Ballot(
        ballot_id=data["ballot_id"],
        candidates=tuple(Candidate(c["candidate_id"], c["agent_id"], c["output"]) for c in data["candidates"]),
        opened_at=to_millis(data["occurred_at"]),
        deadline_at=to_millis(data["deadline_at"]),
    )
    ballot = dataclasses.replace(ballot, voters=(*ballot.voters, data["voter_agent_id"]))
    return _put(state, dataclasses.replace(mission, ballot=ballot))


def _vote_recorded(state: State, data: Data) -> State:
    mission = state.missions[data["mission_id"]]
    ballot = mission.ballot
    if ballot is None:
        return state
    votes = {**ballot.votes, data["voter_agent_id"]: (data["candidate_id"], data.get("confidence", 1.0))}
    return _put(state, dataclasses.replace(mission, ballot=dataclasses.replace(ballot, votes=votes)))


def _consensus(state: State, data: Data) -> State:
    mission = state.missions[data["mission_id"]]
    return _put(state, dataclasses.replace(mission, decision=data.get("output"), consensus_ms=data["consensus_ms"]))


def _ended(phase: str) -> Callable[[State, Data], State]:
    def end(state: State, data: Data) -> State:
        mission_id = data["mission_id"]
        ended = dataclasses.replace(state.missions[mission_id], phase=phase, ended_at=to_millis(data["occurred_at"]))
        return _unqueue(_put(state, ended), lambda queued: queued[0] != mission_id)

    return end


def _retired(state: State, data: Data) -> State:
    mission_id = data["mission_id"]
    missions = {key: mission for key, mission in state.missions.items() if key != mission_id}
    return dataclasses.replace(state, missions=missions, retired=PSet(state.retired).add(mission_id))


def _deadlock_broken(state: State, data: Data) -> State:
    return dataclasses.replace(state, broken_waits=state.broken_waits | {data["wait_id"]})


_APPLY: dict[str, Callable[[State, Data], State]] = {
    "MissionAccepted": _accepted,
    "MissionRejected": _rejected,
    "PhaseStarted": _phase_started,
    "PlanAdopted": _plan_adopted,
    "TaskQueued": _queued,
    "TaskAssigned": _assigned,
    "TaskStartRecorded": _start_recorded,
    "TaskReassigned": _reassigned,
    "TaskCancelled": _cancelled,
    "TaskResultRecorded": _result,
    "AgentEnlisted": _enlisted,
    "AgentDelisted": _delisted,
    "AgentThrottleNoted": _throttle_noted,
    "VoteRequested": _vote_requested,
    "VoteRecorded": _vote_recorded,
    "ConsensusReached": _consensus,
    "ConsensusTimedOut": _consensus,
    "MissionCompleted": _ended(COMPLETED),
    "MissionFailed": _ended(MISSION_FAILED),
    "MissionRetired": _retired,
    "DeadlockBroken": _deadlock_broken,
}
_ABOUT_AGENT = frozenset({"AgentDelisted", "AgentThrottleNoted"})
_CREATING = frozenset({"MissionAccepted", "MissionRejected", "AgentEnlisted", "DeadlockBroken"})
_ABOUT_MISSION = frozenset(_APPLY) - _ABOUT_AGENT - _CREATING
