"""Cross-checking per task, given/when/then: replicas agree, disagree and get a tie-breaker, stay disputed, close on
the consensus window with a quorum, fail; downstream tasks and the ballot get the agreed output."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.coordinator.crosscheck import compare, majority, normalise
from swarmlog.schemas.records import (
    ConsensusReached,
    MissionCompleted,
    TaskAssigned,
    TaskCancelled,
    TaskCrossChecked,
    TaskQueued,
    VoteRequested,
)

from .conformance import assert_conforms
from .harness import Swarm, named, task

WINDOW = {"strategy": "MAJORITY", "window_ms": 1000, "quorum": 0.5}


def swarm_of(*agents: str, tasks: list | None = None, **fields) -> Swarm:
    """A swarm of `code` agents running mission m: `tasks`, by default one task t on three replicas and a task u on
    its output."""
    swarm = Swarm()
    for agent_id in agents:
        swarm.register(agent_id, "code")
    default = [task("t", "code", replicas=3), task("u", "code", depends_on=["t"])]
    swarm.submit("m", tasks or default, **fields)
    return swarm


def answer(swarm: Swarm, task_id: str, *outputs: str) -> list:
    """The running replicas of a task answer, in replica order, skipping those given None; the events they caused."""
    running = sorted((a for a in swarm.running() if a.task_id == task_id), key=lambda a: a.replica)
    assert len(running) == len(outputs)
    return [e for a, out in zip(running, outputs, strict=True) if out is not None for e in swarm.complete(a, out)]


def checks(swarm: Swarm) -> list[tuple]:
    """(task, outcome, chosen replica, support, tie-breaker, timed out) of every TaskCrossChecked journaled."""
    return [
        (c.task_id, c.outcome, c.replica, c.support, c.tie_breaker, c.timed_out)
        for c in named(swarm.journal, TaskCrossChecked)
    ]


def downstream(swarm: Swarm) -> TaskAssigned:
    """The assignment of task u."""
    [assigned] = [a for a in named(swarm.journal, TaskAssigned) if a.task_id == "u"]
    return assigned


def test_replicas_that_agree_after_normalising_give_the_earliest_agreeing_output_downstream():
    swarm = swarm_of("a", "b", "c", "d")
    answer(swarm, "t", "Paris", "  paris\n", "Lyon")
    assert checks(swarm) == [("t", "AGREED", 0, 2, None, False)]
    [check] = named(swarm.journal, TaskCrossChecked)
    assert [(r.replica, r.agent_id, r.group) for r in check.compared] == [(0, "a", 0), (1, "b", 0), (2, "c", 1)]
    assert downstream(swarm).inputs == {"t": "Paris"}
    assert swarm.replay() == swarm.state


def test_json_outputs_agree_whatever_their_key_order_and_spacing():
    swarm = swarm_of("a", "b", "c", "d")
    answer(swarm, "t", '{"answer": 42, "unit": "m"}', '{"unit":"M","answer":42}', '{"answer": 41}')
    assert checks(swarm) == [("t", "AGREED", 0, 2, None, False)]


def test_a_disagreement_runs_a_tie_breaker_on_another_agent_which_settles_it():
    swarm = swarm_of("a", "b", "c", tasks=[task("t", "code", replicas=2), task("u", "code", depends_on=["t"])])
    events = answer(swarm, "t", "a cat", "a dog")
    assert checks(swarm) == [("t", "TIE_BREAK", None, 1, 2, False)]
    [tie_breaker] = named(events, TaskAssigned)
    assert (tie_breaker.task_id, tie_breaker.replica, tie_breaker.agent_id) == ("t", 2, "c")
    answer(swarm, "t", "A  Dog")
    assert checks(swarm)[-1] == ("t", "AGREED", 1, 2, None, False)
    assert downstream(swarm).inputs == {"t": "a dog"}
    assert swarm.state.missions["m"].tasks["t"].replicas == 3
    for event in swarm.journal:
        assert_conforms(event)
    assert swarm.replay() == swarm.state


def test_a_tie_breaker_that_agrees_with_no_one_leaves_the_task_disputed_with_the_earliest_output():
    swarm = swarm_of("a", "b", "c", tasks=[task("t", "code", replicas=2), task("u", "code", depends_on=["t"])])
    answer(swarm, "t", "a cat", "a dog")
    answer(swarm, "t", "a bird")
    assert checks(swarm)[-1] == ("t", "DISPUTED", 0, 1, None, False)
    assert downstream(swarm).inputs == {"t": "a cat"}


def test_without_an_agent_for_a_tie_breaker_the_task_is_disputed_at_once():
    swarm = swarm_of("a", "b", tasks=[task("t", "code", replicas=2), task("u", "code", depends_on=["t"])])
    answer(swarm, "t", "a cat", "a dog")
    assert checks(swarm) == [("t", "DISPUTED", 0, 1, None, False)]
    assert downstream(swarm).inputs == {"t": "a cat"}


def test_the_window_closes_a_comparison_once_a_quorum_is_in_and_cancels_the_late_replica():
    swarm = swarm_of("a", "b", "c", "d", consensus=WINDOW)
    answer(swarm, "t", "yes", None, None)
    swarm.now_ms += 500
    answer(swarm, "t", "yes", None)
    assert swarm.tick(499) == []
    events = swarm.tick(1)
    assert checks(swarm) == [("t", "AGREED", 0, 2, None, True)]
    [cancelled] = named(events, TaskCancelled)
    assert (cancelled.replica, cancelled.agent_id) == (2, "c")
    assert "consensus window (1000 ms) passed with 2 of 3 replicas in" in cancelled.reason
    assert downstream(swarm).inputs == {"t": "yes"}
    assert swarm.replay() == swarm.state


def test_past_the_window_the_output_that_makes_the_quorum_closes_the_comparison():
    swarm = swarm_of("a", "b", "c", "d", consensus=WINDOW)
    answer(swarm, "t", "yes", None, None)
    assert swarm.tick(5000) == []  # one of three is below the quorum (1.5)
    answer(swarm, "t", "no", None)
    assert checks(swarm) == [("t", "TIE_BREAK", None, 1, 3, True)]
    assert [(a.replica, a.agent_id) for a in swarm.running() if a.task_id == "t"] == [(3, "d")]


def test_a_replica_that_fails_for_good_does_not_block_the_others():
    swarm = swarm_of("a", "b", "c", "d", "e", "f")
    answer(swarm, "t", "ok", "OK", None)
    for _ in range(3):
        [failing] = [a for a in swarm.running() if a.task_id == "t"]
        swarm.fail(failing, "MODEL_ERROR")
    assert checks(swarm) == [("t", "AGREED", 0, 2, None, False)]
    assert downstream(swarm).inputs == {"t": "ok"}


def test_a_tie_breaker_waiting_for_an_agent_past_the_window_leaves_the_task_disputed():
    swarm = swarm_of(
        "a", "b", "c", tasks=[task("t", "code", replicas=2), task("busy", "code")], consensus=WINDOW
    )  # c runs `busy`, the tie-breaker queues
    answer(swarm, "t", "a cat", "a dog")
    [queued] = named(swarm.journal, TaskQueued)
    assert (queued.task_id, queued.replica) == ("t", 2)
    swarm.tick(1000)
    assert checks(swarm)[-1] == ("t", "DISPUTED", 0, 1, None, True)
    assert swarm.state.queue == ()
    assert swarm.replay() == swarm.state


def test_the_ballot_sees_agreed_outputs_only_and_disputed_tasks_all_their_outputs():
    agreed = swarm_of("a", "b", "c", tasks=[task("t", "code", replicas=3)])
    events = answer(agreed, "t", "x", "x", "y")
    assert named(events, VoteRequested) == []
    assert named(events, ConsensusReached)[0].output == "x"
    assert named(events, MissionCompleted)[0].outputs == ["x"]
    disputed = swarm_of("a", "b", tasks=[task("t", "code", replicas=2)])
    requests = named(answer(disputed, "t", "x", "y"), VoteRequested)
    assert [c.candidate_id for c in requests[0].candidates] == ["t/0", "t/1"]


TEXT = st.text(st.sampled_from(["a", "A", "ß", " ", "\n", "{", "}", "[", "]", '"', ":", ",", "1", "É", "\\", "u"]))
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner) | st.dictionaries(TEXT, inner),
)
OUTPUT = TEXT | JSON.map(json.dumps)
"""Text, and JSON (NaN and Infinity too, which are not JSON) as a model may write it."""


@given(OUTPUT)
def test_normalising_is_idempotent(output: str):
    assert normalise(normalise(output)) == normalise(output)


@given(st.lists(OUTPUT, min_size=1, max_size=5), st.randoms())
def test_the_comparison_does_not_depend_on_which_replica_gave_which_output(outputs: list[str], random):
    shuffled = list(outputs)
    random.shuffle(shuffled)
    before, after = compare(dict(enumerate(outputs))), compare(dict(enumerate(shuffled)))
    assert majority(before) == majority(after)
    assert sorted(len(group) for group in before) == sorted(len(group) for group in after)
    if majority(before):
        assert normalise(outputs[before[0][0]]) == normalise(shuffled[after[0][0]])


def test_where_the_mission_passes_replicas_inputs_carry_each_replica_s_output_too():
    swarm = swarm_of("a", "b", "c", pass_replicas=True, final_action={"prompt": "ship"})
    swarm.register("boss", "decision_making")
    answer(swarm, "t", "Paris", "paris", "Lyon")
    assert downstream(swarm).inputs == {"t": "Paris", "t/0": "Paris", "t/1": "paris", "t/2": "Lyon"}
    swarm.complete(downstream(swarm), "done")
    [final] = [a for a in swarm.running() if a.kind == "FINAL"]
    assert final.inputs == {"consensus": "done"}  # the leaf, u, has one replica
    plain = swarm_of("a", "b", "c", "d")
    answer(plain, "t", "Paris", "paris", "Lyon")
    assert downstream(plain).inputs == {"t": "Paris"}


def test_the_final_action_gets_each_replica_of_a_replicated_leaf_where_the_mission_passes_replicas():
    swarm = swarm_of(
        "a", "b", tasks=[task("t", "code", replicas=2)], pass_replicas=True, final_action={"prompt": "ship"}
    )
    swarm.register("boss", "decision_making")
    requests = named(answer(swarm, "t", "x", "y"), VoteRequested)
    for request in requests:
        swarm.vote(request, "t/1")
    [final] = swarm.running()
    assert final.inputs == {"consensus": "y", "t/0": "x", "t/1": "y"}
