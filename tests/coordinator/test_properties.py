"""Properties of random swarms: routing only to free agents, each attempt assigned once, replay == live, redelivery."""

from __future__ import annotations

import json
import pickle

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmlog.coordinator import Decision, Receive, Tick, decide, evolve
from swarmlog.coordinator.state import DONE, FAILED, PENDING, QUEUED, RUNNING, State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDeregistered,
    AgentRegistered,
    BudgetExceeded,
    BudgetRestored,
    DeadlockDetected,
    MissionSubmitted,
    TaskAssigned,
    TaskCompleted,
    TaskFailed,
    TaskReleased,
    VoteCast,
    VoteRequested,
)
from swarmlog.settings import Settings
from swarmlog.topics import JOURNAL, spec_for

from .conformance import assert_conforms
from .harness import Swarm, attempt_of, named, task

CAPABILITIES = ["code", "review", "test", "decision_making"]
AGENTS = [f"a{i}" for i in range(6)]
OUTPUTS = ["x", "y"]
JOURNAL_EVENTS = frozenset(spec_for(Settings(), JOURNAL).events)


def register(swarm: Swarm, data: st.DataObject) -> Receive:
    capabilities = data.draw(st.lists(st.sampled_from(CAPABILITIES), min_size=1, unique=True))
    return _receive(
        swarm,
        AgentRegistered,
        agent_id=data.draw(st.sampled_from(AGENTS)),
        capabilities=capabilities,
        model="m",
        brain="scripted",
        node="n",
        gpu=None,
        region=data.draw(st.sampled_from(["eu", "eu", "us"])),
        slot=data.draw(st.integers(0, 7)),
        capacity=data.draw(st.sampled_from([1, 1, 2, 3])),
    )


def lose(swarm: Swarm, data: st.DataObject) -> Receive:
    agent_id = data.draw(st.sampled_from(AGENTS))
    if data.draw(st.booleans()):
        return _receive(
            swarm,
            AgentDeclaredDead,
            agent_id=agent_id,
            registration_id="r",
            last_heartbeat_at=0,
            timeout_ms=5000,
            in_flight_task=None,
        )
    return _receive(swarm, AgentDeregistered, agent_id=agent_id, reason="bye")


def budget(swarm: Swarm, data: st.DataObject) -> Receive:
    agent_id = data.draw(st.sampled_from(AGENTS))
    if data.draw(st.booleans()):
        return _receive(swarm, BudgetExceeded, agent_id=agent_id, window_start=0, window_end=1, used=2, budget=1)
    return _receive(swarm, BudgetRestored, agent_id=agent_id, window_start=1)


def _dag(data: st.DataObject) -> list[dict]:
    tasks = []
    for index in range(data.draw(st.integers(1, 4))):
        depends_on = data.draw(st.lists(st.sampled_from([t["task_id"] for t in tasks]), unique=True)) if tasks else []
        tasks.append(
            task(
                f"t{index}",
                *data.draw(st.lists(st.sampled_from(CAPABILITIES[:3]), max_size=1)),
                depends_on=depends_on,
                replicas=data.draw(st.integers(1, 2)),
            )
        )
    return tasks


def submit(swarm: Swarm, data: st.DataObject) -> Receive:
    planned = data.draw(st.booleans())
    return _receive(
        swarm,
        MissionSubmitted,
        mission_id=f"m{data.draw(st.integers(0, 5))}",
        title="t",
        region=data.draw(st.sampled_from([None, "eu", "us"])),
        tasks=[] if planned else _dag(data),
        planning={"prompt": "plan", "required_capabilities": ["code"]} if planned else None,
        consensus={
            "strategy": data.draw(st.sampled_from(["MAJORITY", "CONFIDENCE_WEIGHTED"])),
            "window_ms": 10_000,
            "quorum": data.draw(st.sampled_from([0.5, 1.0])),
        },
        final_action=data.draw(st.sampled_from([None, {"prompt": "act", "required_capabilities": []}])),
        deadline_ms=data.draw(st.sampled_from([None, 20_000, 200_000])),
        token_budget=data.draw(st.sampled_from([None, 50, 10_000])),
        submitted_by="test",
    )


def answer(swarm: Swarm, data: st.DataObject) -> Receive | None:
    """A result for a running attempt, or (sometimes) a late one for any attempt ever assigned."""
    pool = swarm.running() if data.draw(st.integers(0, 4)) else named(swarm.journal, TaskAssigned)
    if not pool:
        return None
    assigned = data.draw(st.sampled_from(pool))
    about = attempt_of(assigned)
    action = data.draw(st.sampled_from(["complete", "complete", "fail", "release"]))
    if action == "fail":
        return _receive(
            swarm,
            TaskFailed,
            **about,
            failure="MALFORMED_OUTPUT",
            detail="",
            raw_output=None,
            steps=1,
            prompt_tokens=data.draw(st.integers(0, 20)),
            completion_tokens=3,
            latency_ms=1,
        )
    if action == "release":
        return _receive(swarm, TaskReleased, **about, reason="drain")
    output = data.draw(st.sampled_from(OUTPUTS))
    if assigned.kind == "PLAN":
        output = data.draw(st.sampled_from([json.dumps(_dag(data)), "not a plan"]))
    return _receive(
        swarm,
        TaskCompleted,
        **about,
        output=output,
        confidence=1.0,
        steps=1,
        prompt_tokens=data.draw(st.integers(0, 20)),
        completion_tokens=5,
        latency_ms=3,
    )


def vote(swarm: Swarm, data: st.DataObject) -> Receive | None:
    requests = [
        r
        for r in named(swarm.journal, VoteRequested)
        if swarm.state.missions[r.mission_id].decision is None or not data.draw(st.integers(0, 5))
    ]
    if not requests:
        return None
    request = data.draw(st.sampled_from(requests))
    candidate = data.draw(st.sampled_from(request.candidates)).candidate_id
    return _receive(
        swarm,
        VoteCast,
        mission_id=request.mission_id,
        ballot_id=request.ballot_id,
        voter_agent_id=request.voter_agent_id,
        candidate_id=candidate,
        confidence=data.draw(st.floats(0, 1)),
        reason=None,
    )


def tick(swarm: Swarm, data: st.DataObject) -> Tick:
    swarm.now_ms += data.draw(st.integers(0, 15_000))
    return Tick(swarm.now_ms, f"tick-{len(swarm.journal)}-{swarm.now_ms}")


def deadlock(swarm: Swarm, data: st.DataObject) -> Receive:
    cycle = data.draw(st.lists(st.sampled_from(AGENTS), min_size=2, max_size=3, unique=True))
    return _receive(
        swarm,
        DeadlockDetected,
        cycle=cycle,
        wait_ids=[f"w-{agent}-{data.draw(st.integers(0, 2))}" for agent in cycle],
        waits_started_at=[data.draw(st.integers(0, 3)) for _ in cycle],
    )


def _receive(swarm: Swarm, kind: type[Event], **fields) -> Receive:
    return Receive(swarm.input(kind, **fields), swarm.now_ms)


ACTIONS = [register] * 2 + [lose, budget] + [submit] * 2 + [answer] * 8 + [vote] * 4 + [tick] * 3 + [deadlock]


def check_consistent(state: State) -> None:
    """Agents' tasks, replicas and the queue agree; idle agents are the available ones, filed by capabilities and load; a settled cross-check leaves no replica of its task to run, and
    gives a done replica's output."""
    for agent in state.agents.values():
        assert len({(mission_id, task_id) for mission_id, task_id, _ in agent.tasks}) == len(agent.tasks)
        for mission_id, task_id, index in agent.tasks:
            replica = state.missions[mission_id].replica(task_id, index)
            assert (replica.status, replica.agent_id) == (RUNNING, agent.agent_id)
    assert state.idle == {agent.agent_id for agent in state.agents.values() if agent.available}
    filed = {capabilities: list(members) for capabilities, members in state.idle.groups()}
    assert filed == {
        capabilities: sorted(
            (agent.load, agent.agent_id)
            for agent in state.agents.values()
            if agent.available and agent.capabilities == capabilities
        )
        for capabilities in {agent.capabilities for agent in state.agents.values() if agent.available}
    }, "idle agents are filed by their capabilities, in (load, id) order"
    for mission_id, task_id, index in state.queue:
        assert state.missions[mission_id].active
        assert state.missions[mission_id].replica(task_id, index).status == QUEUED
    for mission in state.missions.values():
        assert mission.tokens >= 0
        if mission.token_budget is not None and mission.active:
            assert mission.tokens <= mission.token_budget
        held = {
            task_id: [mission.replica(task_id, i) for i in range(spec.replicas)]
            for task_id, spec in mission.tasks.items()
        }
        statuses_of = {task_id: {replica.status for replica in replicas} for task_id, replicas in held.items()}
        assert mission.pending == {task_id for task_id, found in statuses_of.items() if PENDING in found}
        assert mission.failed_tasks == {task_id for task_id, found in statuses_of.items() if found <= {FAILED}}
        assert mission.unfinished == {task_id for task_id in mission.tasks if not mission.finished(task_id)}
        assert mission.unstarted == {
            task_id
            for task_id, replicas in held.items()
            if any(r.status == RUNNING and not r.started for r in replicas)
        }, "the unstarted index names the tasks with a replica running, not started"
        for task_id, check in mission.checks.items():
            statuses = statuses_of[task_id]
            if check.replica is not None:
                assert mission.replica(task_id, check.replica).status == DONE
                assert not statuses & {PENDING, QUEUED, RUNNING} or not mission.active


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_swarms_keep_the_invariants(data):
    swarm = Swarm("eu", ("eu", "us"))
    assigned: set[tuple] = set()
    for _ in range(data.draw(st.integers(1, 80))):
        command = data.draw(st.sampled_from(ACTIONS))(swarm, data)
        if command is None:
            continue
        before = pickle.dumps(swarm.state)
        decision = decide(command, swarm.state)
        if not isinstance(decision, Decision):
            continue
        state = swarm.state
        for event in decision.events:
            assert_conforms(event)
            assert event.name in JOURNAL_EVENTS, f"{event.name} is not a journal event"
            if isinstance(event, TaskAssigned):
                agent = state.agents[event.agent_id]
                assert agent.alive and not agent.throttled and agent.region == "eu"
                assert len(agent.tasks) < agent.capacity, "routed past the agent's capacity"
                assert not any(held[:2] == (event.mission_id, event.task_id) for held in agent.tasks)
                key = (event.mission_id, event.task_id, event.replica, event.attempt)
                assert key not in assigned
                assigned.add(key)
            state = evolve(state, event)
        assert pickle.loads(before) == swarm.state, "decide or evolve mutated its input"
        swarm.state = state
        swarm.journal.extend(decision.events)
        check_consistent(state)
        assert decide(command, state) == Decision(), "a redelivered command emitted events"
        assert swarm.replay() == state
    split = data.draw(st.integers(0, len(swarm.journal)))
    snapshot = swarm.start
    for event in swarm.journal[:split]:
        snapshot = evolve(snapshot, event)
    state = pickle.loads(pickle.dumps(snapshot))
    for event in swarm.journal[split:]:
        state = evolve(state, event)
    assert state == swarm.state
