"""Failover, given/when/then: dead and leaving agents, released and late results, broken deadlocks."""

from swarmlog.coordinator import Receive, Rejected, decide
from swarmlog.coordinator.inbox import messages
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDelisted,
    AgentDeregistered,
    DeadlockBroken,
    DeadlockDetected,
    MissionCompleted,
    PeerAnswered,
    TaskAssigned,
    TaskCompleted,
    TaskQueued,
    TaskReassigned,
    TaskReleased,
    TaskResultRecorded,
)

from .conformance import assert_conforms
from .harness import Swarm, attempt_of, named, task


def two_coders_on_a_task() -> Swarm:
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.register("b", "code")
    swarm.submit("m", [task("t", "code")])
    return swarm


def test_a_dead_agent_s_task_is_reassigned_with_the_next_attempt_and_its_late_result_is_stale():
    swarm = two_coders_on_a_task()
    [first] = swarm.running()
    events = swarm.send(
        AgentDeclaredDead, agent_id="a", registration_id="r-a", last_heartbeat_at=0, timeout_ms=5000, in_flight_task="t"
    )
    assert [type(e) for e in events] == [AgentDelisted, TaskReassigned, TaskAssigned]
    assert (events[1].attempt, events[1].from_agent_id) == (1, "a")
    assert (events[2].attempt, events[2].agent_id) == (2, "b")
    before = swarm.state
    [late] = swarm.complete(first, "zombie answer")
    assert isinstance(late, TaskResultRecorded) and (late.stale, late.attempt) == (True, 1)
    assert swarm.state.missions["m"].replicas == before.missions["m"].replicas
    assert swarm.state.agents == before.agents
    assert named(swarm.complete(events[2], "real answer"), MissionCompleted)[0].outputs == ["real answer"]
    for event in swarm.journal:
        assert_conforms(event)


def test_a_lost_task_waits_in_the_queue_until_an_agent_registers():
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.submit("m", [task("t", "code")])
    events = swarm.send(AgentDeregistered, agent_id="a", reason="scale down")
    assert [type(e) for e in events] == [AgentDelisted, TaskReassigned, TaskQueued]
    assert (events[1].attempt, events[2].attempt) == (1, 2)
    [assigned] = named(swarm.register("c", "code"), TaskAssigned)
    assert (assigned.agent_id, assigned.attempt) == ("c", 2)


def test_a_released_task_moves_to_another_agent():
    swarm = two_coders_on_a_task()
    [first] = swarm.running()
    events = swarm.send(
        TaskReleased,
        **attempt_of(first),
        reason="draining",
    )
    assert [type(e) for e in events] == [TaskReassigned, TaskAssigned]
    assert events[1].agent_id != first.agent_id


def test_a_result_for_a_task_never_assigned_is_rejected():
    swarm = two_coders_on_a_task()
    bogus = swarm.input(
        TaskCompleted,
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
    [broken] = swarm.send(DeadlockDetected, **cycle)
    assert isinstance(broken, DeadlockBroken)
    assert (broken.wait_id, broken.waiter_agent_id, broken.mission_id) == ("w-new", "a", "m")
    [message] = messages([broken], swarm.state)
    answered = message.event
    assert (message.agent_id, message.slot) == ("a", swarm.state.agents["a"].slot)
    assert isinstance(answered, PeerAnswered)
    assert (answered.question_id, answered.to_agent_id, answered.from_agent_id) == ("w-new", "a", "b")
    assert "deadlock" in answered.error
    assert swarm.send(DeadlockDetected, **cycle) == []
    assert swarm.send(DeadlockDetected, cycle=["x", "y"], wait_ids=["w-x", "w-y"], waits_started_at=[1, 2]) == []
    assert_conforms(broken)
    assert_conforms(answered)


def test_waits_started_together_break_the_one_with_the_larger_id():
    swarm = two_coders_on_a_task()
    [broken] = swarm.send(DeadlockDetected, cycle=["a", "b"], wait_ids=["w-1", "w-2"], waits_started_at=[5, 5])
    assert (broken.wait_id, broken.waiter_agent_id) == ("w-2", "b")


def test_a_deadlock_without_a_start_per_wait_is_rejected():
    swarm = two_coders_on_a_task()
    detected = swarm.input(DeadlockDetected, cycle=["a", "b"], wait_ids=["w-1", "w-2"], waits_started_at=[5])
    assert isinstance(decide(Receive(detected, swarm.now_ms), swarm.state), Rejected)


def test_redelivered_inputs_emit_nothing():
    swarm = two_coders_on_a_task()
    [first] = swarm.running()
    dead = swarm.input(
        AgentDeclaredDead,
        agent_id="a",
        registration_id="r-a",
        last_heartbeat_at=0,
        timeout_ms=5000,
        in_flight_task=None,
    )
    late = swarm.input(
        TaskCompleted,
        **attempt_of(first),
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
    assigned = named(events, TaskAssigned)
    assert [(e.agent_id, e.attempt) for e in assigned] == [("a", 2)]


def test_a_failed_replica_waits_for_a_busy_fresh_agent_rather_than_retrying_where_it_failed():
    swarm = Swarm()
    swarm.register("a", "review")
    swarm.register("b", "review")
    swarm.submit("m", [task("r", "review"), task("s", "review")])
    first, second = swarm.running()
    events = swarm.fail(first)
    assert named(events, TaskQueued) and not named(events, TaskAssigned)
    drained = swarm.complete(second, "done")
    assert [(e.task_id, e.agent_id) for e in named(drained, TaskAssigned)] == [("r", second.agent_id)]
