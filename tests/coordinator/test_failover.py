"""Failover, given/when/then: dead and leaving agents, released and late results, broken deadlocks."""

from swarmlog.coordinator import Receive, Rejected, decide
from swarmlog.coordinator.inbox import messages

from .conformance import assert_conforms
from .harness import Swarm, named, task


def two_coders_on_a_task() -> Swarm:
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.register("b", "code")
    swarm.submit("m", [task("t", "code")])
    return swarm


def test_a_dead_agent_s_task_is_reassigned_with_the_next_attempt_and_its_late_result_is_stale():
    swarm = two_coders_on_a_task()
    [first] = swarm.running()
    events = swarm.send("AgentDeclaredDead", agent_id="a", last_heartbeat_at=0, timeout_ms=5000, in_flight_task="t")
    assert [e.name for e in events] == ["AgentDelisted", "TaskReassigned", "TaskAssigned"]
    assert (events[1].data["attempt"], events[1].data["from_agent_id"]) == (1, "a")
    assert (events[2].data["attempt"], events[2].data["agent_id"]) == (2, "b")
    before = swarm.state
    [late] = swarm.complete(first, "zombie answer")
    assert (late.name, late.data["stale"], late.data["attempt"]) == ("TaskResultRecorded", True, 1)
    assert swarm.state.missions["m"].replicas == before.missions["m"].replicas
    assert swarm.state.agents == before.agents
    assert named(swarm.complete(events[2], "real answer"), "MissionCompleted")[0].data["outputs"] == ["real answer"]
    for event in swarm.journal:
        assert_conforms(event)


def test_a_lost_task_waits_in_the_queue_until_an_agent_registers():
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.submit("m", [task("t", "code")])
    events = swarm.send("AgentDeregistered", agent_id="a", reason="scale down")
    assert [(e.name, e.data.get("attempt")) for e in events] == [
        ("AgentDelisted", None),
        ("TaskReassigned", 1),
        ("TaskQueued", 2),
    ]
    [assigned] = named(swarm.register("c", "code"), "TaskAssigned")
    assert (assigned.data["agent_id"], assigned.data["attempt"]) == ("c", 2)


def test_a_released_task_moves_to_another_agent():
    swarm = two_coders_on_a_task()
    [first] = swarm.running()
    events = swarm.send(
        "TaskReleased",
        **{k: first.data[k] for k in ("mission_id", "task_id", "replica", "attempt", "agent_id")},
        reason="draining",
    )
    assert [e.name for e in events] == ["TaskReassigned", "TaskAssigned"]
    assert events[1].data["agent_id"] != first.data["agent_id"]


def test_a_result_for_a_task_never_assigned_is_rejected():
    swarm = two_coders_on_a_task()
    bogus = swarm.input(
        "TaskCompleted",
        mission_id="m",
        task_id="nope",
        replica=0,
        attempt=1,
        agent_id="a",
        output="?",
        steps=1,
        latency_ms=1,
    )
    assert isinstance(decide(Receive(bogus, swarm.now_ms), swarm.state), Rejected)


def test_a_deadlock_is_broken_once_by_aborting_the_youngest_wait():
    swarm = two_coders_on_a_task()
    cycle = {"cycle": ["b", "a"], "wait_ids": ["w-old", "w-new"], "waits_started_at": [100, 200]}
    [broken] = swarm.send("DeadlockDetected", **cycle)
    assert (broken.name, broken.data["wait_id"], broken.data["waiter_agent_id"], broken.data["mission_id"]) == (
        "DeadlockBroken",
        "w-new",
        "a",
        "m",
    )
    [message] = messages([broken], swarm.state)
    answered = message.event
    assert (message.agent_id, message.slot) == ("a", swarm.state.agents["a"].slot)
    assert (
        answered.name,
        answered.data["question_id"],
        answered.data["to_agent_id"],
        answered.data["from_agent_id"],
    ) == ("PeerAnswered", "w-new", "a", "b")
    assert "deadlock" in answered.data["error"]
    assert swarm.send("DeadlockDetected", **cycle) == []
    assert swarm.send("DeadlockDetected", cycle=["x", "y"], wait_ids=["w-x", "w-y"], waits_started_at=[1, 2]) == []
    assert_conforms(broken)
    assert_conforms(answered)


def test_waits_started_together_break_the_one_with_the_larger_id():
    swarm = two_coders_on_a_task()
    [broken] = swarm.send("DeadlockDetected", cycle=["a", "b"], wait_ids=["w-1", "w-2"], waits_started_at=[5, 5])
    assert (broken.data["wait_id"], broken.data["waiter_agent_id"]) == ("w-2", "b")


def test_a_deadlock_without_a_start_per_wait_is_rejected():
    swarm = two_coders_on_a_task()
    detected = swarm.input("DeadlockDetected", cycle=["a", "b"], wait_ids=["w-1", "w-2"], waits_started_at=[5])
    assert isinstance(decide(Receive(detected, swarm.now_ms), swarm.state), Rejected)


def test_redelivered_inputs_emit_nothing():
    swarm = two_coders_on_a_task()
    [first] = swarm.running()
    dead = swarm.input("AgentDeclaredDead", agent_id="a", last_heartbeat_at=0, timeout_ms=5000, in_flight_task=None)
    late = swarm.input(
        "TaskCompleted",
        **{k: first.data[k] for k in ("mission_id", "task_id", "replica", "attempt", "agent_id")},
        output="late",
        steps=1,
        latency_ms=1,
    )
    for event in (dead, late):
        assert swarm.apply(Receive(event, swarm.now_ms)) != []
        assert swarm.apply(Receive(event, swarm.now_ms)) == []


def test_a_failed_replica_retries_on_the_agent_that_failed_it_when_no_other_could_ever_take_it():
    swarm = Swarm()
    swarm.register("a", "review")
    swarm.register("b", "code")
    swarm.submit("m", [task("r", "review")])
    [first] = swarm.running()
    events = swarm.fail(first)
    assigned = named(events, "TaskAssigned")
    assert [(e.data["agent_id"], e.data["attempt"]) for e in assigned] == [("a", 2)]


def test_a_failed_replica_waits_for_a_busy_fresh_agent_rather_than_retrying_where_it_failed():
    swarm = Swarm()
    swarm.register("a", "review")
    swarm.register("b", "review")
    swarm.submit("m", [task("r", "review"), task("s", "review")])
    first, second = swarm.running()
    events = swarm.fail(first)
    assert named(events, "TaskQueued") and not named(events, "TaskAssigned")
    drained = swarm.complete(second, "done")
    assert [(e.data["task_id"], e.data["agent_id"]) for e in named(drained, "TaskAssigned")] == [
        ("r", second.data["agent_id"])
    ]
