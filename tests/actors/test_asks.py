"""Asking a peer, pure: the ask step and its wait, the question, the answer, the peer directory."""

from __future__ import annotations

import functools
import json

from test_agent_domain import ME, command

from swarmlog.actors.domain import InboxDecision, Order, Question, Reply, decide, initial
from swarmlog.actors.peers import MAX_TARGETS, evolve_peers, resolve, targets
from swarmlog.actors.steps import MAX_ASKS, Run, Usage, advance, question, reply, wait_ended
from swarmlog.schemas.codec import encode
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentDeclaredDead, from_fields

ORDER = Order("cmd-1", "m1", "t1", 0, 1, "Plan the release.", {}, max_steps=4)


def ask(target: str) -> str:
    return json.dumps({"action": "ask", "content": "Which day?", "confidence": 0.5, "target": target})


def registered(agent_id: str, slot: int, region: str = "region-0", capabilities=("review",)) -> Event:
    envelope = {
        "event_id": f"reg-{agent_id}",
        "occurred_at": 1_000,
        "correlation_id": None,
        "causation_id": None,
        "producer": f"agent:{agent_id}",
    }
    return from_fields(
        "AgentRegistered",
        envelope
        | {
            "agent_id": agent_id,
            "capabilities": list(capabilities),
            "model": "m",
            "brain": "scripted",
            "node": "n",
            "gpu": None,
            "region": region,
            "slot": slot,
        },
    )


def test_an_ask_starts_a_wait_on_the_peer_and_the_run_waits_for_its_answer():
    run = Run(ORDER, ME, started_ms=1_000, peers=("agent-2",))
    events, waiting = advance(run, ask("agent-2"), Usage(10, 5, 1_500, "g1"))
    assert [e.name for e in events] == ["TokensUsed", "TaskStepTaken", "WaitStarted"]
    started = events[-1]
    assert (started.wait_id, started.waiter_agent_id, started.waits_for_agent_id) == (
        "cmd-1/wait-1",
        ME,
        "agent-2",
    )
    assert waiting is not None and waiting.waiting is not None and waiting.waiting.question == "Which day?"
    for event in events:
        encode(event)


def test_the_question_names_the_wait_and_the_reply_slot_and_its_end_carries_the_answer_into_the_notes():
    _, waiting = advance(Run(ORDER, ME, 1_000, peers=("agent-2",)), ask("agent-2"), Usage(1, 1, 1_500, "g1"))
    asked = question(waiting, reply_slot=7, now_ms=1_600)
    assert (asked.question_id, asked.to_agent_id, asked.reply_slot) == (
        "cmd-1/wait-1",
        "agent-2",
        7,
    )
    ended, going_on = wait_ended(waiting, "ANSWERED", "Tuesday", None, 2_000)
    assert (ended.outcome, ended.wait_id) == ("ANSWERED", "cmd-1/wait-1")
    assert going_on.waiting is None and going_on.notes[-1] == "agent-2 answered: Tuesday"
    encode(asked), encode(ended)


def test_a_run_asks_at_most_max_asks_times_and_only_peers_it_was_offered():
    run = Run(ORDER, ME, 1_000, peers=("agent-2",))
    assert "ask" in run.allowed and run.schema["oneOf"][3]["properties"]["target"] == {"enum": ["agent-2"]}
    _, malformed = advance(run, ask("agent-9"), Usage(1, 1, 1_500, "g1"))
    assert malformed is None  # closed as MALFORMED_OUTPUT
    for _ in range(MAX_ASKS):
        _, run = advance(run, ask("agent-2"), Usage(1, 1, 1_500, "g1"))
        _, run = wait_ended(run, "TIMED_OUT", None, "no answer", 2_000)
    assert "ask" not in run.allowed
    assert "ask" not in Run(ORDER, ME, 1_000).allowed  # nobody to ask


def test_a_question_to_this_agent_is_answered_once_by_the_model_and_others_are_ignored():
    fields = {
        "question_id": "w1",
        "from_agent_id": "agent-2",
        "reply_slot": 5,
        "question": "Which day?",
        "mission_id": "m1",
        "task_id": "t1",
    }
    decision = decide(command("PeerQuestion", "q-1", to_agent_id=ME, **fields), initial(ME))
    assert decision.effects == (Reply(Question("q-1", "w1", "agent-2", 5, "Which day?", "m1", "t1")),)
    assert decide(command("PeerQuestion", "q-2", to_agent_id="agent-3", **fields), initial(ME)) == InboxDecision()
    used, answered = reply(
        decision.effects[0].question,
        ME,
        '{"action":"answer","content":"Tuesday","confidence":1}',
        Usage(3, 2, 2_000, "g1"),
    )
    assert (answered.answer, answered.to_agent_id, answered.event_id) == (
        "Tuesday",
        "agent-2",
        "q-1/answer",
    )
    _, refused = reply(decision.effects[0].question, ME, "no json", Usage(3, 2, 2_000, "g1"))
    assert refused.answer is None and refused.error.startswith("malformed")
    encode(used), encode(answered)


def test_the_directory_offers_the_latest_registered_peers_of_the_region_and_resolves_ids_and_capabilities():
    events = [registered(f"old-{i}", i) for i in range(MAX_TARGETS)]
    events += [
        registered("agent-2", 40, capabilities=("review",)),
        registered("agent-3", 41, region="region-1"),
        registered(ME, 42),
    ]
    peers = functools.reduce(evolve_peers, events, {})
    offered = targets(peers, ME, "region-0")
    assert "agent-2" in offered and "agent-3" not in offered and ME not in offered and len(offered) == MAX_TARGETS
    assert resolve(peers, ME, "region-0", "agent-2") == ("agent-2", 40)
    assert resolve(peers, ME, "region-0", "review") == ("agent-2", 40)  # the first of those able, by id
    assert resolve(peers, ME, "region-0", ME) is None
    death = AgentDeclaredDead(
        event_id="death",
        occurred_at=2_000,
        producer="streams",
        agent_id="agent-2",
        registration_id="reg-agent-2",
        last_heartbeat_at=1_000,
        timeout_ms=5_000,
    )
    gone = evolve_peers(peers, death)
    assert "agent-2" not in gone
