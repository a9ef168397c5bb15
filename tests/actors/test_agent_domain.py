"""Given an agent's history, when an inbox command arrives, then these events and effects (and no I/O)."""

from __future__ import annotations

import functools

import pytest
from avro_strategies import event_data, event_of
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmlog.actors.domain import (
    PROJECTION,
    AgentState,
    HandleInbox,
    InboxDecision,
    InboxRejected,
    Vote,
    Work,
    decide,
    evolve,
    initial,
)
from swarmlog.actors.steps import (
    Run,
    Usage,
    advance,
    ballot_prompt,
    ballot_schema,
    experience,
    released,
    step_taken,
    vote_events,
)
from swarmlog.kafka.records import TOPIC_EVENTS
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import encode
from swarmlog.schemas.records import TaskCompleted, TaskFailed, from_fields

ME = "agent-1"


def command(name: str, event_id: str = "cmd-1", **fields) -> HandleInbox:
    envelope = {
        "event_id": event_id,
        "occurred_at": 1_000,
        "correlation_id": "m1",
        "causation_id": None,
        "producer": "coordinator:region-0",
    }
    return HandleInbox(from_fields(name, envelope | fields), now_ms=2_000)


def assigned(agent_id: str = ME, attempt: int = 1, max_steps: int = 3, event_id: str = "cmd-1") -> HandleInbox:
    return command(
        "TaskAssigned",
        event_id,
        mission_id="m1",
        task_id="t1",
        replica=0,
        attempt=attempt,
        kind="WORK",
        agent_id=agent_id,
        slot=3,
        score=1.0,
        prompt="What is 2+2?",
        inputs={"hint": "arithmetic"},
        required_capabilities=[],
        max_steps=max_steps,
    )


def fold(state: AgentState, events) -> AgentState:
    return functools.reduce(evolve, events, state)


def test_a_new_task_is_started_and_worked_on():
    decision = decide(assigned(), initial(ME))
    assert [e.name for e in decision.events] == ["TaskStarted"]
    assert decision.events[0].event_id == "cmd-1/started"
    assert isinstance(decision.effects[0], Work) and decision.effects[0].order.prompt == "What is 2+2?"
    encode(decision.events[0])


def test_a_task_for_another_agent_sharing_the_slot_is_ignored():
    assert decide(assigned("agent-2"), initial(ME)) == InboxDecision()


def test_a_closed_task_is_never_redone_and_an_interrupted_one_resumes_without_a_second_start():
    started = fold(initial(ME), decide(assigned(), initial(ME)).events)
    resumed = decide(assigned(), started)
    assert resumed.events == () and isinstance(resumed.effects[0], Work)
    run = Run(resumed.effects[0].order, ME, started_ms=2_000)
    events, _ = advance(run, '{"action": "answer", "content": "4", "confidence": 1}', Usage(10, 5, 2_500, "g1"))
    assert decide(assigned(), fold(started, events)) == InboxDecision()


def test_a_new_attempt_of_a_closed_task_is_a_new_task():
    state = AgentState(ME, closed={("m1", "t1", 0, 1): 1_500})
    assert [e.name for e in decide(assigned(attempt=2), state).events] == ["TaskStarted"]


def test_cancelling_a_started_task_fails_it_as_cancelled_once():
    state = fold(initial(ME), decide(assigned(), initial(ME)).events)
    cancel = command(
        "TaskCancelled", "cmd-2", mission_id="m1", task_id="t1", replica=0, attempt=1, agent_id=ME, reason="superseded"
    )
    (failed,) = decide(cancel, state).events
    assert failed.failure == "CANCELLED"
    encode(failed)
    assert decide(cancel, evolve(state, failed)) == InboxDecision()


def test_a_ballot_is_voted_on_once():
    request = command(
        "VoteRequested",
        "cmd-3",
        mission_id="m1",
        ballot_id="b1",
        voter_agent_id=ME,
        slot=3,
        candidates=[
            {"candidate_id": "c1", "agent_id": "a", "output": "4"},
            {"candidate_id": "c2", "agent_id": "b", "output": "5"},
        ],
        deadline_at=9_000,
    )
    (effect,) = decide(request, initial(ME)).effects
    assert isinstance(effect, Vote) and ballot_schema(effect.ballot)["oneOf"][0]["properties"]["candidate_id"] == {
        "enum": ["c1", "c2"]
    }
    used, vote = vote_events(
        effect.ballot,
        ME,
        '{"action": "vote", "content": "right", "confidence": 0.8, "candidate_id": "c1"}',
        Usage(20, 9, 3_000, "g1"),
    )
    assert vote.candidate_id == "c1" and used.generation_id == "cmd-3/gen-1/g1"
    encode(used), encode(vote)
    assert decide(request, evolve(initial(ME), vote)) == InboxDecision()


def test_a_ballot_past_its_deadline_is_not_voted_on():
    request = command(
        "VoteRequested",
        "cmd-3",
        mission_id="m1",
        ballot_id="b1",
        voter_agent_id=ME,
        slot=3,
        candidates=[{"candidate_id": "c1", "agent_id": "a", "output": "4"}],
        deadline_at=2_000,
    )
    assert decide(request, initial(ME)) == InboxDecision()  # now_ms is 2_000


def test_a_retried_step_is_a_new_generation_and_the_same_generation_keeps_its_ids():
    run = run_of(3)
    text = '{"action": "recall", "content": "x", "confidence": 1}'
    first, _ = advance(run, text, Usage(10, 5, 2_100, "g1"))
    again, _ = advance(run, text, Usage(10, 5, 2_100, "g1"))
    retried, _ = advance(run, text, Usage(10, 5, 2_900, "g2"))  # the same step generated again after a restart
    assert first == again
    assert first[0].generation_id != retried[0].generation_id
    assert first[0].event_id != retried[0].event_id
    assert first[1].event_id == retried[1].event_id  # the step itself is the same step


def test_an_event_that_is_no_inbox_command_is_rejected_whoever_it_names():
    stray = command("GroundTruthUpdated", document_id="d", version=1, content="x")
    assert isinstance(decide(stray, initial(ME)), InboxRejected)
    assert isinstance(decide(command("AgentDeregistered", agent_id="agent-2", reason="x"), initial(ME)), InboxRejected)


def test_a_budget_throttles_until_restored():
    exceeded = command("BudgetExceeded", agent_id=ME, window_start=0, window_end=60_000, used=9, budget=5).event
    restored = command("BudgetRestored", agent_id=ME, window_start=0).event
    assert evolve(initial(ME), exceeded).throttled and not fold(initial(ME), [exceeded, restored]).throttled


def test_something_that_is_not_an_inbox_command_is_rejected():
    assert isinstance(decide(command("AgentDeregistered", agent_id=ME, reason="x"), initial(ME)), InboxRejected)


def run_of(max_steps: int) -> Run:
    return Run(decide(assigned(max_steps=max_steps), initial(ME)).effects[0].order, ME, started_ms=2_000)


def test_an_answer_completes_the_task_with_its_totals():
    events, after = advance(
        run_of(3), '{"action": "answer", "content": "4", "confidence": 0.7}', Usage(10, 5, 2_300, "g1")
    )
    assert after is None and [e.name for e in events] == ["TokensUsed", "TaskStepTaken", "TaskCompleted"]
    completed = events[2]
    assert (completed.output, completed.confidence, completed.steps, completed.latency_ms) == ("4", 0.7, 1, 300)
    for event in events:
        encode(event)


def test_an_answer_and_its_step_record_how_the_model_sampled():
    text = '{"action": "answer", "content": "4", "confidence": 1}'
    events, _ = advance(run_of(3), text, Usage(10, 5, 2_300, "g1", temperature=0.2, seed=1234))
    step, completed = events[1], events[2]
    assert (step.temperature, step.seed) == (completed.temperature, completed.seed) == (0.2, 1234)
    unsampled, _ = advance(run_of(3), text, Usage(10, 5, 2_300, "g1"))
    assert (unsampled[2].temperature, unsampled[2].seed) == (None, None), "no model ran: nothing to record"
    for event in (*events, *unsampled):
        encode(event)


def test_malformed_output_fails_the_task_with_the_raw_text():
    events, after = advance(run_of(3), "I think 4", Usage(10, 5, 2_300, "g1"))
    assert after is None and events[-1].failure == "MALFORMED_OUTPUT"
    assert events[-1].raw_output == "I think 4"
    encode(events[-1])


def test_notes_carry_to_the_next_step_and_the_last_step_must_conclude():
    run = run_of(2)
    events, after = advance(
        run, '{"action": "remember", "content": "it is arithmetic", "confidence": 1}', Usage(10, 5, 2_100, "g1")
    )
    assert [e.name for e in events] == ["TokensUsed", "TaskStepTaken"] and after.allowed == ("answer", "fail")
    assert "remember: it is arithmetic" in after.prompt()
    events, _ = advance(after, '{"action": "recall", "content": "x", "confidence": 1}', Usage(1, 1, 2_200, "g1"))
    assert events[-1].failure == "MALFORMED_OUTPUT"
    encode(released(after, "stopping", 2_300))


def test_a_remember_step_records_an_experience_with_a_derived_id_and_its_embedding():
    events, _ = advance(
        run_of(3), '{"action": "remember", "content": "2+2 is 4", "confidence": 1}', Usage(10, 5, 2_100, "g1")
    )
    step = step_taken(events)
    recorded = experience(step, [0.6, 0.8], node="n1", ttl_s=600)
    assert recorded.event_id == recorded.experience_id == f"{step.causation_id}/experience-1"
    assert (recorded.content, recorded.embedding, recorded.occurred_at) == (
        "2+2 is 4",
        [0.6, 0.8],
        2_100,
    )
    assert recorded.mission_id == "m1" and recorded.ttl_s == 600
    encode(recorded)
    assert step_taken(advance(run_of(3), "garbage", Usage(1, 1, 2_200, "g1"))[0]) is None


def test_recalled_memories_are_in_the_prompt():
    assert "Recalled memories:\n- 2+2 is 4" in run_of(3).prompt(memories=("2+2 is 4",))


@given(st.lists(st.text(max_size=60), max_size=6))
def test_the_step_loop_always_closes_within_max_steps(outputs):
    run, closed = run_of(3), None
    for text in outputs + ['{"action": "answer", "content": "", "confidence": 0}'] * 3:
        events, run = advance(run, text, Usage(1, 1, 3_000, "g1"))
        if run is None:
            closed = events[-1]
            break
    assert closed is not None and closed.steps <= 3 and isinstance(closed, TaskCompleted | TaskFailed)


FOLDED = {name for topic in PROJECTION.topics for name in TOPIC_EVENTS[topic]}
NOT_FOLDED = sorted({name for names in TOPIC_EVENTS.values() for name in names} - FOLDED)
PER_KIND = settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def mine(name: str, data: st.DataObject):
    """An event of kind `name` with every agent field naming this agent."""
    record = data.draw(event_data(default_catalog().latest(name)))
    return event_of(name, record | {field: ME for field in record if field.endswith("agent_id")})


@pytest.mark.parametrize("name", NOT_FOLDED)
@PER_KIND
@given(data=st.data())
def test_no_event_of_a_topic_outside_the_projection_changes_the_state(name, data):
    state = AgentState(ME, frozenset({("m", "t", 0, 1)}), {("m", "t", 0, 0): 1_000}, {"b": 1_000}, seen_ms=1_000)
    assert evolve(state, mine(name, data)) == state


@pytest.mark.parametrize("topic", PROJECTION.topics)
@PER_KIND
@given(data=st.data())
def test_every_topic_of_the_projection_carries_events_that_change_the_state(topic, data):
    changing = [evolve(initial(ME), mine(name, data)) != initial(ME) for name in sorted(TOPIC_EVENTS[topic])]
    assert any(changing), topic


def test_a_ballot_shows_the_voter_what_the_candidates_answer_and_a_v1_request_only_the_candidates():
    fields = dict(mission_id="m1", ballot_id="b1", voter_agent_id=ME, slot=3, deadline_at=9_000)
    candidates = [{"candidate_id": "c1", "agent_id": "a", "output": "4"}]
    (asked,) = decide(
        command("VoteRequested", "cmd-3", candidates=candidates, question="2 + 2?", **fields), initial(ME)
    ).effects
    (v1,) = decide(command("VoteRequested", "cmd-4", candidates=candidates, **fields), initial(ME)).effects
    assert isinstance(asked, Vote) and isinstance(v1, Vote)
    assert ballot_prompt(asked.ballot).splitlines()[:3] == [
        "Several agents answered the same task:",
        "2 + 2?",
        "Candidate answers:",
    ]
    assert ballot_prompt(v1.ballot).splitlines()[:2] == ["Several agents answered the same task.", "Candidate answers:"]
