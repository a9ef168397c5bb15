"""Missions, given/when/then: the three phases, plans, retries, the queue, deadlines and budgets."""

import json

from swarmlog.schemas.records import (
    AgentDeregistered,
    AgentEnlisted,
    BudgetExceeded,
    BudgetRestored,
    ConsensusReached,
    ConsensusTimedOut,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    PhaseStarted,
    PlanAdopted,
    TaskAssigned,
    TaskCancelled,
    TaskCrossChecked,
    TaskQueued,
    TaskReassigned,
    VoteRecorded,
    VoteRequested,
)

from .conformance import assert_conforms
from .harness import Swarm, named, task

PIPELINE = [
    task("generate", "code"),
    task("review", "review", depends_on=["generate"], replicas=2),
    task("test", "test", depends_on=["review"]),
    task("deploy", "ops", depends_on=["test"], replicas=3),
]
FINAL = {"prompt": "ship it", "required_capabilities": ["ops"]}


def crew(swarm: Swarm) -> None:
    """Agents for every stage of the pipeline, and a decider."""
    for agent_id, capability in [
        ("g1", "code"),
        ("g2", "code"),
        ("r1", "review"),
        ("r2", "review"),
        ("t1", "test"),
        ("d1", "ops"),
        ("d2", "ops"),
        ("d3", "ops"),
        ("boss", "decision_making"),
    ]:
        swarm.register(agent_id, capability)


def answer(swarm: Swarm, task_id: str, *outputs: str) -> list:
    """The running replicas of a task answer, in replica order; returns the events of the last answer."""
    running = sorted((a for a in swarm.running() if a.task_id == task_id), key=lambda a: a.replica)
    assert len(running) == len(outputs)
    return [event for assigned, out in zip(running, outputs, strict=False) for event in swarm.complete(assigned, out)]


def test_a_pipeline_with_replicas_runs_all_three_phases():
    swarm = Swarm()
    crew(swarm)
    swarm.submit("m", PIPELINE, final_action=FINAL)
    answer(swarm, "generate", "code v1")
    reviews = [a for a in swarm.running() if a.task_id == "review"]
    assert {a.agent_id for a in reviews} == {"r1", "r2"}
    assert all(a.inputs == {"generate": "code v1"} for a in reviews)
    answer(swarm, "review", "lgtm", "nit")
    [test] = swarm.running()
    assert test.inputs == {"review": "lgtm"}
    answer(swarm, "test", "green")
    swarm.now_ms += 1000
    events = answer(swarm, "deploy", "deployed", "rolled back", "paused")
    checks = named(swarm.journal, TaskCrossChecked)
    assert [(c.task_id, c.outcome, c.replica, c.support) for c in checks] == [
        ("review", "DISPUTED", 0, 1),  # no third reviewer to break the tie
        ("deploy", "DISPUTED", 0, 1),
    ]
    assert [e.phase for e in named(events, PhaseStarted)] == ["CONSENSUS"]
    requests = named(events, VoteRequested)
    assert [r.voter_agent_id for r in requests] == ["g1", "r1", "r2", "t1", "d1", "d2", "d3"]
    assert [c.candidate_id for c in requests[0].candidates] == ["deploy/0", "deploy/1", "deploy/2"]
    assert {r.question for r in requests} == {"do deploy"}  # the one leaf task's prompt: what the outputs answer

    swarm.now_ms += 500
    for request in requests[:3]:
        [recorded] = swarm.vote(request, "deploy/0")
        assert isinstance(recorded, VoteRecorded) and recorded.voter_agent_id == request.voter_agent_id
    reached = swarm.vote(requests[3], "deploy/0")
    [consensus] = named(reached, ConsensusReached)
    assert (consensus.output, consensus.votes, consensus.voters) == ("deployed", 4, 7)
    assert consensus.consensus_ms == 500
    [final] = named(reached, TaskAssigned)
    assert (final.kind, final.agent_id, final.inputs) == (
        "FINAL",
        "boss",
        {"consensus": "deployed"},
    )
    [done] = named(swarm.complete(final, "shipped", tokens=4), MissionCompleted)
    expected = {
        "success": True,
        "outputs": ["shipped"],
        "latency_ms": 1500,
        "agent_count": 8,
        "tasks_completed": 8,
        "tasks_failed": 0,
        "consensus_ms": 500,
        "tokens_used": 74,
    }
    assert {key: getattr(done, key) for key in expected} == expected
    assert swarm.vote(requests[4], "deploy/2") == []
    for event in swarm.journal:
        assert_conforms(event)
    assert swarm.replay() == swarm.state


def test_a_single_candidate_is_consensus_at_once_and_no_final_action_completes_after_it():
    swarm = Swarm()
    crew(swarm)
    swarm.submit("m", [task("generate", "code", replicas=2)])
    events = answer(swarm, "generate", "same", "same")
    assert named(events, VoteRequested) == []
    assert named(events, ConsensusReached)[0].support == 1.0
    assert named(events, MissionCompleted)[0].outputs == ["same"]


def test_consensus_times_out_with_the_leader_or_the_first_candidate():
    for votes, expected in [(["generate/1"], ("generate/1", "b")), ([], (None, "a"))]:
        swarm = Swarm()
        crew(swarm)
        swarm.submit(
            "m",
            [task("generate", "code", replicas=2)],
            consensus={"strategy": "MAJORITY", "window_ms": 1000, "quorum": 1.0},
        )
        requests = named(answer(swarm, "generate", "a", "b"), VoteRequested)
        for request, candidate in zip(requests, votes, strict=False):
            swarm.vote(request, candidate)
        assert swarm.tick(999) == []
        timed_out = named(swarm.tick(1), ConsensusTimedOut)[0]
        assert (timed_out.candidate_id, timed_out.output, timed_out.votes) == (*expected, len(votes))
        assert swarm.state.missions["m"].phase == "COMPLETED"


def test_confidence_weighted_votes_follow_confidence():
    swarm = Swarm()
    for agent_id in ("a", "b", "c"):
        swarm.register(agent_id, "code")
    swarm.submit(
        "m",
        [task("t", "code", replicas=3)],
        consensus={"strategy": "CONFIDENCE_WEIGHTED", "window_ms": 1000, "quorum": 1.0},
    )
    requests = named(answer(swarm, "t", "x", "y", "z"), VoteRequested)  # disputed: no fourth agent
    swarm.vote(requests[0], "t/0", confidence=0.9)
    swarm.vote(requests[1], "t/1", confidence=0.2)
    reached = named(swarm.vote(requests[2], "t/1", confidence=0.3), ConsensusReached)[0]
    assert (reached.candidate_id, round(reached.support, 2)) == ("t/0", 0.64)


def test_a_planning_task_s_answer_becomes_the_task_list():
    swarm = Swarm()
    crew(swarm)
    swarm.submit("m", planning={"prompt": "plan it", "required_capabilities": ["code"]})
    [planner] = swarm.running()
    assert (planner.kind, planner.task_id) == ("PLAN", "@plan")
    plan = [
        {"task_id": "a", "prompt": "A", "required_capabilities": ["test"], "depends_on": []},
        {"task_id": "b", "prompt": "B", "required_capabilities": ["review"], "depends_on": ["a"]},
    ]
    events = swarm.complete(planner, json.dumps(plan))
    [adopted] = named(events, PlanAdopted)
    assert [(t.task_id, t.depends_on) for t in adopted.tasks] == [("a", []), ("b", ["a"])]
    assert_conforms(adopted)
    assert [e.phase for e in named(events, PhaseStarted)] == ["WORK"]
    assert [(e.task_id, e.agent_id) for e in named(events, TaskAssigned)] == [("a", "t1")]
    answer(swarm, "a", "done a")
    assert named(answer(swarm, "b", "done b"), MissionCompleted)[0].outputs == ["done b"]
    assert swarm.replay() == swarm.state


def test_an_invalid_plan_fails_the_mission_with_the_reason():
    swarm = Swarm()
    crew(swarm)
    swarm.submit("m", planning={"prompt": "plan it", "required_capabilities": []})
    [failed] = named(
        swarm.complete(swarm.running()[0], '[{"task_id": "a", "prompt": "p", "depends_on": ["a"]}]'), MissionFailed
    )
    assert failed.reason.startswith("invalid plan: dependency cycle")


def test_an_invalid_mission_is_rejected_once():
    swarm = Swarm()
    [rejected] = swarm.submit("m", [task("a", depends_on=["b"])])
    assert isinstance(rejected, MissionRejected) and "unknown tasks" in rejected.reason
    assert swarm.submit("m", [task("a")]) == []


def test_a_failed_attempt_retries_on_another_agent_and_fails_the_mission_after_max_attempts():
    swarm = Swarm()
    for agent_id in ("a", "b", "c", "d"):
        swarm.register(agent_id, "code")
    swarm.submit("m", [task("t", "code")])
    agents = []
    for attempt in (1, 2, 3):
        [running] = swarm.running()
        assert running.attempt == attempt and running.agent_id not in agents
        agents.append(running.agent_id)
        events = swarm.fail(running, tokens=7)
    [failed] = named(events, MissionFailed)
    assert (failed.tasks_failed, failed.malformed_count, failed.tokens_used) == (3, 3, 21)
    assert "failed on every replica" in failed.reason


def test_a_replicated_task_succeeds_when_one_replica_does():
    swarm = Swarm()
    for agent_id in ("a", "b", "c", "d", "e"):
        swarm.register(agent_id, "code")
    swarm.submit("m", [task("t", "code", replicas=2)])
    first = next(a for a in swarm.running() if a.replica == 0)
    swarm.complete(first, "ok")
    for _ in range(3):
        events = swarm.fail(next(a for a in swarm.running() if a.replica == 1), "MODEL_ERROR")
    assert named(events, MissionCompleted)[0].outputs == ["ok"]


def test_the_queue_drains_fifo_when_an_agent_registers():
    swarm = Swarm()
    swarm.submit("m1", [task("a", "gpu")])
    swarm.submit("m2", [task("b", "gpu")])
    assert [e.attempt for e in named(swarm.journal, TaskQueued)] == [1, 1]
    [assigned] = named(swarm.register("x", "gpu"), TaskAssigned)
    assert (assigned.mission_id, assigned.attempt) == ("m1", 1)
    [assigned] = named(swarm.complete(assigned, "done"), TaskAssigned)
    assert (assigned.mission_id, assigned.agent_id) == ("m2", "x")
    assert swarm.state.queue == ()


def test_a_throttled_agent_gets_nothing_until_its_budget_is_restored():
    swarm = Swarm()
    swarm.register("x", "code")
    swarm.send(BudgetExceeded, agent_id="x", window_start=0, window_end=60_000, used=11, budget=10)
    assert named(swarm.submit("m", [task("a", "code")]), TaskQueued)
    [assigned] = named(swarm.send(BudgetRestored, agent_id="x", window_start=60_000), TaskAssigned)
    assert assigned.agent_id == "x"


def test_a_mission_past_its_deadline_fails_and_frees_its_agents():
    swarm = Swarm()
    swarm.register("x", "code")
    swarm.submit("m", [task("a", "code")], deadline_ms=5000)
    assert swarm.tick(4999) == []
    events = swarm.tick(1)
    assert [type(e) for e in events] == [TaskCancelled, MissionFailed]
    assert events[1].reason.startswith("deadline passed")
    assert not swarm.state.agents["x"].tasks
    assert swarm.tick(1) == []


def test_a_mission_over_its_token_budget_fails():
    swarm = Swarm()
    swarm.register("x", "code")
    swarm.register("y", "code")
    swarm.submit("m", [task("a", "code"), task("b", "code", depends_on=["a"])], token_budget=100)
    [failed] = named(swarm.complete(swarm.running()[0], "out", tokens=101), MissionFailed)
    assert (failed.reason, failed.tokens_used) == ("token budget exceeded: used 101 of 100", 101)


def test_an_agent_of_capacity_3_runs_3_tasks_at_once_and_takes_a_queued_one_when_one_ends():
    swarm = Swarm()
    [enlisted] = named(swarm.register("x", "code", capacity=3), AgentEnlisted)
    assert enlisted.capacity == 3
    events = swarm.submit("m", [task(name, "code") for name in "abcd"])
    assert sorted(a.task_id for a in named(events, TaskAssigned)) == ["a", "b", "c"]
    assert [q.task_id for q in named(events, TaskQueued)] == ["d"]
    assert len(swarm.state.agents["x"].tasks) == 3
    first = swarm.running()[0]
    [assigned] = named(swarm.complete(first, "done"), TaskAssigned)
    assert (assigned.task_id, assigned.agent_id) == ("d", "x")


def test_replicas_of_one_task_never_share_an_agent_of_any_capacity():
    swarm = Swarm()
    swarm.register("x", "code", capacity=3)
    events = swarm.submit("m", [task("a", "code", replicas=2)])
    assert [(a.replica, a.agent_id) for a in named(events, TaskAssigned)] == [(0, "x")]
    assert [q.replica for q in named(events, TaskQueued)] == [1]
    [assigned] = named(swarm.register("y", "code"), TaskAssigned)
    assert (assigned.replica, assigned.agent_id) == (1, "y")


def test_a_lost_agent_gives_back_every_task_it_held():
    swarm = Swarm()
    swarm.register("x", "code", capacity=2)
    swarm.submit("m", [task("a", "code"), task("b", "code")])
    events = swarm.send(AgentDeregistered, agent_id="x", reason="bye")
    assert sorted(r.task_id for r in named(events, TaskReassigned)) == ["a", "b"]
    assert not swarm.state.agents["x"].tasks
