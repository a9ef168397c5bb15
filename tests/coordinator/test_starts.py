"""Start timeouts, given/when/then: an attempt its agent never starts is taken back, cancelled and reassigned."""

from swarmlog.coordinator.state import START_TIMEOUT_MS
from swarmlog.schemas.records import TaskAssigned, TaskCancelled, TaskReassigned, TaskStartRecorded

from .conformance import assert_conforms
from .harness import Swarm, named, task


def _one_task_on(swarm: Swarm) -> TaskAssigned:
    """Two coders, a one-task mission; the TaskAssigned."""
    swarm.register("c1", "code")
    swarm.register("c2", "code")
    [assigned] = named(swarm.submit("m", [task("t", "code")]), TaskAssigned)
    return assigned


def test_an_attempt_not_started_within_the_start_timeout_is_cancelled_and_reassigned():
    swarm = Swarm()
    assigned = _one_task_on(swarm)
    assert swarm.tick(START_TIMEOUT_MS - 1) == []
    events = swarm.tick(1)
    assert [type(event) for event in events] == [TaskCancelled, TaskReassigned, TaskAssigned]
    cancelled, reassigned, again = events
    for event in events:
        assert_conforms(event)
    assert (cancelled.agent_id, cancelled.attempt) == (assigned.agent_id, 1)
    assert f"not started within {START_TIMEOUT_MS} ms" in reassigned.reason
    assert (again.attempt, again.agent_id) == (2, "c2" if assigned.agent_id == "c1" else "c1")
    assert swarm.replay() == swarm.state


def test_a_started_attempt_is_never_taken_back():
    swarm = Swarm()
    assigned = _one_task_on(swarm)
    [recorded] = swarm.started(assigned)
    assert_conforms(recorded)
    assert isinstance(recorded, TaskStartRecorded)
    assert swarm.started(assigned) == []  # a redelivered or repeated start records nothing
    assert swarm.tick(10 * START_TIMEOUT_MS) == []


def test_a_start_of_a_superseded_attempt_records_nothing():
    swarm = Swarm()
    assigned = _one_task_on(swarm)
    swarm.tick(START_TIMEOUT_MS)
    assert swarm.started(assigned) == []
    [again] = swarm.running()
    assert not swarm.state.missions["m"].replica("t", 0).started and again.attempt == 2


def test_no_attempt_is_taken_back_for_a_silence_the_coordinator_could_not_read():
    swarm = Swarm()
    assigned = _one_task_on(swarm)
    back_at = assigned.occurred_at + START_TIMEOUT_MS  # the coordinator's inputs were away until then
    assert swarm.tick(START_TIMEOUT_MS, inputs_since_ms=back_at) == []
    assert swarm.tick(START_TIMEOUT_MS - 1, inputs_since_ms=back_at) == []
    assert named(swarm.tick(1, inputs_since_ms=back_at), TaskReassigned)
