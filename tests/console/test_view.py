"""The console's fold and its pages, given/when/then: agents by the registry's rule, missions by the coordinator's progress, tasks,
timelines in lanes with payloads and coordinates, dead letters as text and hex, and the bounds on what it keeps."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from swarmlog.commands.status import agent_status
from swarmlog.console import pages, view
from swarmlog.console.view import INITIAL, ConsoleView, Located, evolve, fold
from swarmlog.envelope import stamp
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentHeartbeat,
    AgentRegistered,
    BudgetExceeded,
    BudgetWindowSet,
    ComparedReplica,
    ConsensusReached,
    DeadLetterRecorded,
    DeadlockDetected,
    MissionAccepted,
    MissionCompleted,
    MissionSubmitted,
    PhaseStarted,
    TaskAssigned,
    TaskCrossChecked,
    TaskReassigned,
    TaskResultRecorded,
    TaskSpec,
    TaskStarted,
    TaskStartRecorded,
    TokensUsed,
    VoteCast,
    VoteRecorded,
    WaitEnded,
    WaitStarted,
)
from swarmlog.topics import (
    ALERTS,
    CONTROL,
    DEAD_LETTERS,
    HEARTBEATS,
    JOURNAL,
    MISSIONS,
    REGISTRY,
    TASK_EVENTS,
    USAGE,
    VOTES,
    WAITS,
)

T0 = 1_700_000_000_000
OFFSETS = itertools.count()


def at(topic: str, event: Event, partition: int = 0) -> Located:
    """The event as read from `topic` at the next offset."""
    return Located(topic, partition, next(OFFSETS), event.occurred_at, event)


def made(kind: type[Any], ms: int, producer: str = "coordinator:region-0", **fields: Any) -> Any:
    """An event at T0 + ms."""
    return stamp(kind, producer=producer, occurred_at_ms=T0 + ms, correlation_id=fields.get("mission_id"), **fields)


def registered(agent: str, ms: int = 0) -> Located:
    return at(
        REGISTRY,
        made(
            AgentRegistered,
            ms,
            f"agent:{agent}",
            agent_id=agent,
            capabilities=["code", "review"],
            model="smollm2",
            brain="scripted",
            node="node-7",
            gpu=3,
            region="region-0",
            slot=4,
        ),
    )


def assigned(mission: str, task: str, replica: int, attempt: int, agent: str, ms: int) -> Located:
    fields = dict(mission_id=mission, task_id=task, replica=replica, attempt=attempt)
    return at(JOURNAL, made(TaskAssigned, ms, agent_id=agent, slot=1, score=1.0, prompt="p", **fields))


def result(mission: str, task: str, replica: int, attempt: int, agent: str, ms: int, **more: Any) -> Located:
    fields = dict(mission_id=mission, task_id=task, replica=replica, attempt=attempt, agent_id=agent)
    return at(JOURNAL, made(TaskResultRecorded, ms, succeeded=True, tokens=5, **fields, **more))


def mission_events(mission: str = "m-1") -> list[Located]:
    """A two-replica mission from its submission to its end, its agents' own events among the coordinator's."""
    spec = TaskSpec("write", "write it", ["code"], [], 2)
    return [
        at(MISSIONS, made(MissionSubmitted, 0, "client:test", mission_id=mission, title="Write it", region="region-0")),
        at(
            JOURNAL,
            made(
                MissionAccepted,
                10,
                mission_id=mission,
                region="region-0",
                title="Write it",
                submitted_at=T0,
                tasks=[spec],
            ),
        ),
        assigned(mission, "write", 0, 1, "a-1", 20),
        assigned(mission, "write", 1, 1, "a-2", 21),
        at(
            TASK_EVENTS,
            made(
                TaskStarted, 30, "agent:a-1", mission_id=mission, task_id="write", replica=0, attempt=1, agent_id="a-1"
            ),
        ),
        at(
            JOURNAL,
            made(TaskStartRecorded, 31, mission_id=mission, task_id="write", replica=0, attempt=1, agent_id="a-1"),
        ),
        result(mission, "write", 0, 1, "a-1", 40),
        at(
            VOTES,
            made(
                VoteCast,
                50,
                "agent:a-2",
                mission_id=mission,
                ballot_id="b",
                voter_agent_id="a-2",
                candidate_id="c",
                confidence=1.0,
                reason=None,
            ),
        ),
        at(JOURNAL, made(PhaseStarted, 55, mission_id=mission, phase="CONSENSUS")),
        at(
            JOURNAL,
            made(
                MissionCompleted,
                60,
                mission_id=mission,
                success=True,
                latency_ms=60,
                agent_count=2,
                tasks_completed=2,
                tasks_failed=0,
                outputs=["done"],
            ),
        ),
    ]


def test_an_agent_shows_its_registration_its_latest_heartbeat_and_its_age() -> None:
    registration = registered("a-1")
    beat = made(
        AgentHeartbeat, 1000, "agent:a-1", agent_id="a-1", registration_id=registration.event.event_id, sequence=1,
        status="BUSY", region="region-0", slot=4, in_flight_task="m-1/write",
    )  # fmt: skip

    state = fold(INITIAL, [registration, at(HEARTBEATS, beat)])
    swarm = pages.swarm(state, ("region-0", "region-1"), T0 + 3500)

    [agent] = swarm["agents"]
    assert agent == {
        "agent_id": "a-1", "region": "region-0", "slot": 4, "status": "BUSY", "capabilities": ["code", "review"],
        "model": "smollm2", "brain": "scripted", "gpu": 3, "node": "node-7", "heartbeat_age_s": 2.5,
        "task": "m-1/write", "tokens": 0, "budget": None, "throttled_until": None,
    }  # fmt: skip
    assert [region["agents"] for region in swarm["regions"]] == [{"BUSY": 1}, {}]


def test_an_agents_status_is_the_one_swarmlog_status_shows_alive_silent_and_dead() -> None:
    registration = registered("a-1")
    alive = fold(INITIAL, [registration])
    death = made(
        AgentDeclaredDead, 9000, "streams", agent_id="a-1", registration_id=registration.event.event_id,
        last_heartbeat_at=T0, timeout_ms=5000,
    )  # fmt: skip
    dead = evolve(alive, at(REGISTRY, death))
    for state, now, expected in ((alive, T0 + 100, "IDLE"), (alive, T0 + 60_000, "SILENT"), (dead, T0, "DEAD")):
        agent = state.registry.agents["a-1"]
        assert pages.status_of(agent, now) == agent_status(agent, now) == expected


def test_a_mission_shows_its_phase_tasks_by_state_and_its_end() -> None:
    events = mission_events()
    midway = fold(INITIAL, events[:7])
    [running] = pages.missions(midway)
    assert (running["phase"], running["tasks"], running["ended"]) == ("ACCEPTED", {"ASSIGNED": 1, "DONE": 1}, False)
    assert pages.swarm(midway, ("region-0",), T0)["regions"][0]["running_missions"] == 1

    [ended] = pages.missions(fold(INITIAL, events))
    assert (ended["phase"], ended["succeeded"], ended["latency_ms"], ended["outputs"]) == (
        "COMPLETED",
        True,
        60,
        ["done"],
    )
    assert (ended["title"], ended["region"], ended["submitted_at"]) == ("Write it", "region-0", T0)


def test_a_missions_timeline_is_in_order_in_lanes_with_payloads_and_coordinates() -> None:
    events = mission_events()
    page = pages.mission(fold(INITIAL, reversed(events)), "m-1")  # arrival order does not matter, event time does
    assert page is not None
    steps = page["steps"]
    assert [step["event_id"] for step in steps] == [item.event.event_id for item in events]
    assert page["lanes"] == ["client", "coordinator", "a-1", "a-2"]
    started = next(step for step in steps if step["name"] == "TaskStarted")
    source = events[4]
    assert (started["lane"], started["topic"], started["partition"], started["offset"]) == (
        "a-1", TASK_EVENTS, 0, source.offset,
    )  # fmt: skip
    assert started["payload"]["agent_id"] == "a-1" and started["payload"]["event_id"] == source.event.event_id
    assert steps[-1]["mark"] == "end"
    json.dumps(page)  # JSON-ready as it is


def test_an_event_folded_twice_counts_once() -> None:
    events = mission_events()
    once, twice = fold(INITIAL, events), fold(INITIAL, [*events, *events[:7]])
    assert pages.mission(once, "m-1") == pages.mission(twice, "m-1")


def test_a_task_shows_its_latest_attempt_and_an_older_attempts_news_change_nothing() -> None:
    events = mission_events()[:4]
    reassigned = at(JOURNAL, made(TaskReassigned, 70, mission_id="m-1", task_id="write", replica=0, attempt=1,
                                  from_agent_id="a-1", reason="a-1 died"))  # fmt: skip
    state = fold(INITIAL, [*events, reassigned, assigned("m-1", "write", 0, 2, "a-3", 80)])
    late = evolve(state, result("m-1", "write", 0, 1, "a-1", 90))
    page = pages.mission(late, "m-1")
    assert page is not None
    assert page["tasks"][0] == {
        "task_id": "write", "replica": 0, "state": "ASSIGNED", "attempt": 2, "agent": "a-3", "output": None,
    }  # fmt: skip
    assert any(step["mark"] == "reassigned" for step in page["steps"])


def test_a_mission_is_listed_once_its_submission_or_acceptance_is_read() -> None:
    events = mission_events()
    early = fold(INITIAL, events[2:5])  # its agents' events read before the journal's acceptance
    assert (pages.missions(early), pages.mission(early, "m-1"), early.events) == ([], None, 3)
    page = pages.mission(fold(early, events[:2]), "m-1")
    assert page is not None and [step["name"] for step in page["steps"]] == [e.event.name for e in events[:5]]


def test_a_dead_letter_shows_its_reason_origin_and_bytes_as_hex_and_printable_text() -> None:
    raw = b'\x00<script>alert("x")</script>\xff'
    letter = made(
        DeadLetterRecorded, 0, "coordinator:region-0", origin_topic=MISSIONS, origin_partition=2, origin_offset=17,
        origin_key=b"k<b>", payload=raw, error_type="DecodeError", reason="not avro: <b>bold</b>", consumer="c",
    )  # fmt: skip
    [row] = pages.dead_letters(evolve(INITIAL, at(DEAD_LETTERS, letter)))
    assert row["payload_hex"] == raw.hex() and row["key_hex"] == b"k<b>".hex() and row["size"] == len(raw)
    assert row["payload_text"] == '.<script>alert("x")</script>.'
    assert row["origin"] == {"topic": MISSIONS, "partition": 2, "offset": 17}
    assert row["reason"] == "not avro: <b>bold</b>"


def test_the_view_keeps_the_latest_ended_missions_and_dead_letters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(view, "KEPT_ENDED", 2)
    monkeypatch.setattr(view, "KEPT_DEAD_LETTERS", 1)
    state: ConsoleView = INITIAL
    for n in range(3):
        state = fold(state, mission_events(f"m-{n}"))
    assert [row["mission_id"] for row in pages.missions(state)] == ["m-2", "m-1"]
    assert pages.mission(state, "m-0") is None
    for n in range(2):
        letter = made(
            DeadLetterRecorded, n, "streams", origin_topic=REGISTRY, origin_partition=0, origin_offset=n, payload=b"x",
            error_type="DecodeError", reason=f"bad {n}", consumer="c",
        )  # fmt: skip
        state = evolve(state, at(DEAD_LETTERS, letter))
    assert [row["reason"] for row in pages.dead_letters(state)] == ["bad 1"]


def test_each_event_names_the_sections_it_may_change() -> None:
    events = mission_events()
    assert view.sections(registered("a-1")) == {"swarm"}
    assert view.sections(events[2]) == {"swarm", "missions", "mission:m-1"}
    letter = made(
        DeadLetterRecorded, 0, "streams", origin_topic=REGISTRY, origin_partition=0, origin_offset=0, payload=b"",
        error_type="DecodeError", reason="r", consumer="c",
    )  # fmt: skip
    assert view.sections(at(DEAD_LETTERS, letter)) == {"deadletters"}


def wait(wait_id: str, waiter: str, waits_for: str, ms: int, mission: str | None = None) -> Located:
    return at(
        WAITS,
        made(WaitStarted, ms, f"agent:{waiter}", wait_id=wait_id, waiter_agent_id=waiter, waits_for_agent_id=waits_for,
             mission_id=mission),
    )  # fmt: skip


def test_the_waits_page_shows_active_waits_the_cycles_they_close_and_the_deadlocks_reported() -> None:
    state = fold(INITIAL, [wait("w1", "a", "b", 0), wait("w2", "b", "c", 100), wait("w3", "c", "a", 200, "m-1")])
    page = pages.waits(state, T0 + 1500)
    assert [(w["waiter"], w["waits_for"], w["age_s"]) for w in page["waits"]] == [
        ("a", "b", 1.5), ("b", "c", 1.4), ("c", "a", 1.3)
    ]  # fmt: skip
    assert page["cycles"] == [{"agents": ["a", "b", "c"], "wait_ids": ["w1", "w2", "w3"]}]

    detected = made(
        DeadlockDetected, 300, "streams", cycle=["a", "b", "c"], wait_ids=["w1", "w2", "w3"],
        waits_started_at=[T0, T0 + 100, T0 + 200],
    )  # fmt: skip
    ended = made(
        WaitEnded, 400, "agent:c", wait_id="w3", waiter_agent_id="c", waits_for_agent_id="a", outcome="ABORTED"
    )
    state = fold(state, [at(ALERTS, detected), at(WAITS, ended)])
    page = pages.waits(state, T0 + 500)
    assert [w["wait_id"] for w in page["waits"]] == ["w1", "w2"] and page["cycles"] == []
    assert [(d["name"], d["cycle"]) for d in page["deadlocks"]] == [("DeadlockDetected", ["a", "b", "c"])]
    assert view.sections(at(WAITS, ended)) == {"waits"}
    assert view.sections(wait("w4", "a", "b", 500, "m-1")) == {"waits", "swarm", "missions", "mission:m-1"}


def test_a_batch_folds_as_its_events_one_by_one() -> None:
    registration = registered("a-1")
    beats = [
        at(HEARTBEATS, made(AgentHeartbeat, 1000 * n, "agent:a-1", agent_id="a-1",
                            registration_id=registration.event.event_id, sequence=n, status="BUSY", region="region-0",
                            slot=4))
        for n in range(1, 4)
    ]  # fmt: skip
    items = [registered("a-0"), registration, *mission_events()[:4], *beats, *mission_events("m-2")]
    one_by_one = INITIAL
    for item in items:
        one_by_one = evolve(one_by_one, item)
    assert fold(INITIAL, items) == one_by_one


def test_an_agent_shows_its_tokens_in_the_current_window_against_the_budget_and_its_throttle() -> None:
    window = made(BudgetWindowSet, 0, "streams", window_ms=60_000, tokens=100)
    start = T0 - T0 % 60_000 + 60_000  # a window's start, after the window set
    used = [
        at(USAGE, made(TokensUsed, start - T0 + n, "agent:a-1", agent_id="a-1", generation_id=f"g{n}", prompt_tokens=40,
                       completion_tokens=20))
        for n in range(2)
    ]  # fmt: skip
    throttle = made(
        BudgetExceeded, start - T0 + 5, "streams", agent_id="a-1", window_start=start, window_end=start + 60_000,
        used=120, budget=100,
    )  # fmt: skip
    items = [registered("a-1"), at(CONTROL, window), *used, at(CONTROL, throttle)]
    assert fold(INITIAL, items) == _one_by_one(items)
    for state in (fold(INITIAL, items), _one_by_one(items)):
        [agent] = pages.swarm(state, ("region-0",), start + 1000)["agents"]
        assert (agent["tokens"], agent["budget"], agent["throttled_until"]) == (120, 100, start + 60_000)
        [later] = pages.swarm(state, ("region-0",), start + 61_000)["agents"]
        assert (later["tokens"], later["throttled_until"]) == (0, None)


def _one_by_one(items: list[Located]) -> ConsoleView:
    state = INITIAL
    for item in items:
        state = evolve(state, item)
    return state


def test_a_mission_shows_its_replicas_outputs_their_agreement_and_its_ballots() -> None:
    events = mission_events()[:4]  # two replicas of "write", assigned
    results = [
        result("m-1", "write", 0, 1, "a-1", 40, output="x = 1"),
        result("m-1", "write", 1, 1, "a-2", 41, output="x = 2"),
    ]
    votes = [
        at(JOURNAL, made(VoteRecorded, 50 + n, mission_id="m-1", ballot_id="b", voter_agent_id=voter, candidate_id=choice))
        for n, (voter, choice) in enumerate((("a-1", "c1"), ("a-2", "c2"), ("a-3", "c1")))
    ]  # fmt: skip
    compared = [
        ComparedReplica(replica=0, agent_id="a-1", group=0),
        ComparedReplica(replica=1, agent_id="a-2", group=1),
    ]
    checked = made(TaskCrossChecked, 45, mission_id="m-1", task_id="write", outcome="DISPUTED", replica=0, support=1,
                   compared=compared)  # fmt: skip
    decided = made(ConsensusReached, 60, mission_id="m-1", ballot_id="b", candidate_id="c1", output="x = 1",
                   support=0.67, votes=3, voters=3, strategy="MAJORITY", consensus_ms=20)  # fmt: skip

    halfway = pages.mission(fold(INITIAL, [*events, results[0]]), "m-1")
    page = pages.mission(fold(INITIAL, [*events, *results, at(JOURNAL, checked), *votes, at(JOURNAL, decided)]), "m-1")

    assert halfway is not None and halfway["agreement"] == {"write": "pending"}
    assert page is not None and page["agreement"] == {"write": "disputed 1/2: replica 0 taken"}
    assert [task["output"] for task in page["tasks"]] == ["x = 1", "x = 2"]
    assert page["ballots"] == [{"ballot_id": "b", "votes": {"c1": 2, "c2": 1}, "chosen": "c1"}]


def test_a_replayed_state_is_compared_entry_by_entry_with_the_live_one_the_differing_first() -> None:
    replayed = {"agents/a": {"status": "IDLE"}, "agents/b": {"status": "BUSY"}, "window_ms": 60000}
    live = {"agents/a": {"status": "IDLE"}, "agents/b": {"status": "IDLE"}, "agents/c": {"status": "IDLE"}}
    found = pages.compared(replayed, live)
    assert (found["compared"], found["entries"], found["differing"]) == (True, 4, 3)
    assert [(row["entry"], row["differs"]) for row in found["rows"]] == [
        ("agents/b", True), ("agents/c", True), ("window_ms", True), ("agents/a", False)
    ]  # fmt: skip
    alone = pages.compared(replayed, None)
    assert (alone["compared"], alone["differing"], alone["rows"][0]["live"]) == (False, 0, None)
