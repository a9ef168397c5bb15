"""Issue #19: garbage on every input of the streams worker (empty, one byte, the magic alone, a cut or overlong body,
a known fingerprint with random bytes, 2 MB of random bytes, an event of another kind, a broken invariant, a
duplicate). Each record the worker cannot use is dead-lettered exactly once, with a WARNING naming it; duplicates are
deduped, not dead-lettered; and deaths, deadlocks, throttles and the memory projection go on as if it were not there.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator

import pytest
import redis
from worker_harness import (
    LARGE_BYTES,
    Client,
    Coordinates,
    Worker,
    agent_of,
    cycle_of,
    garbage,
    heartbeat,
    large_records_taken,
    now_event,
    registered,
    running_worker,
)

from swarmlog.schemas.codec import encode
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentDeclaredDead, BudgetExceeded, BudgetRestored

TIMEOUT_MS = 2000
BUDGET = 1000
WINDOW_MS = 4000
TIMER_SLACK_MS = 3000  # how late a timer's decision may come here, as in test_worker.py; targets are in bench/
REGISTRY, HEARTBEATS = "swarm.agents.registry", "swarm.agents.heartbeats"
WAITS, ALERTS, USAGE, CONTROL = "swarm.waits", "swarm.alerts", "swarm.usage", "swarm.control"
EXPERIENCES, DEADLETTER = "swarm.memory.experiences", "swarm.deadletter"
INPUTS = (REGISTRY, HEARTBEATS, WAITS, USAGE, CONTROL, EXPERIENCES)


@pytest.fixture(scope="module")
def worker(broker, settings, redis_url, tmp_path_factory) -> Iterator[Worker]:
    """A running worker as test_worker.py's, on inputs that take the 2 MB garbage record."""
    with (
        large_records_taken(settings, INPUTS),
        running_worker(
            broker.bootstrap,
            broker.kind,
            redis_url,
            tmp_path_factory.mktemp("streams") / "data",
            liveness_timeout_ms=TIMEOUT_MS,
            budget_tokens=BUDGET,
            budget_window_ms=WINDOW_MS,
        ) as started,
    ):
        yield started


@pytest.fixture
def client(broker) -> Client:
    return Client(broker.bootstrap)


def ids(*names: str) -> list[str]:
    run = uuid.uuid4().hex[:6]
    return [f"{name}-garbage-{run}" for name in names]


def origin(letter: Event) -> Coordinates:
    return letter.origin_topic, letter.origin_partition, letter.origin_offset


def send_garbage(client: Client, topic: str, key: str, real: Event, wrong: Event) -> dict[Coordinates, str]:
    """Every kind of garbage on `topic` under `key`, small records first; the kind at each place it landed."""
    kinds = garbage(real, wrong, seed=19)
    return dict(zip(client.send_records(topic, key, kinds.values()), kinds, strict=True))


def assert_dead_lettered_once(
    client: Client, worker: Worker, garbage_at: dict[Coordinates, str], duplicates_at: list[Coordinates]
) -> None:
    """Each garbage record has exactly one dead letter saying why, and a WARNING line; no duplicate has one."""
    watched = set(garbage_at) | set(duplicates_at)
    client.read(
        DEADLETTER, lambda e: origin(e) in watched, until=lambda found: len(found) >= len(garbage_at), timeout_s=15
    )
    letters = client.read(DEADLETTER, lambda e: origin(e) in watched, until=lambda _: False, timeout_s=2)
    assert Counter(origin(letter) for letter in letters) == dict.fromkeys(garbage_at, 1)
    for letter in letters:
        kind = garbage_at[origin(letter)]
        assert letter.error_type == ("NotAnInput" if kind == "another kind of event" else "DecodeError"), kind
        assert letter.reason and letter.consumer == "swarmlog-streams"
        if kind == "2 MB of random bytes":
            assert len(letter.payload) < LARGE_BYTES and "cut" in letter.reason
    log = worker.log.read_text(errors="replace").splitlines()
    for topic, partition, offset in garbage_at:
        assert any("WARNING" in line and f"{topic}[{partition}]@{offset}" in line for line in log), (topic, offset)


def test_a_silent_agent_is_declared_dead_although_garbage_followed_its_last_heartbeat(worker, client):
    (agent,) = ids("silent")
    run = registered(agent)
    client.send(REGISTRY, agent, run)
    beats = []
    for sequence in range(3):
        beats.append(heartbeat(agent, run, sequence))
        client.send(HEARTBEATS, agent, beats[-1])
        time.sleep(0.3)
    duplicates = client.send_records(HEARTBEATS, agent, [encode(beats[1])])
    duplicates += client.send_records(REGISTRY, agent, [encode(run)])
    # Then the agent goes silent (kill -9) and garbage is the last thing on its partitions of both input topics.
    usage = now_event("TokensUsed", agent_id=agent, generation_id="g", prompt_tokens=1, completion_tokens=1)
    garbage_at = send_garbage(client, HEARTBEATS, agent, beats[-1], usage)
    garbage_at |= send_garbage(client, REGISTRY, agent, run, usage)
    deaths = client.read(
        REGISTRY,
        lambda e: isinstance(e, AgentDeclaredDead) and e.agent_id == agent,
        until=bool,
        timeout_s=(TIMEOUT_MS + TIMER_SLACK_MS) / 1000 + 5,
    )
    assert [death.registration_id for death in deaths] == [run.event_id], "declared dead, once"
    assert deaths[0].occurred_at - beats[-1].occurred_at - TIMEOUT_MS <= TIMER_SLACK_MS
    assert_dead_lettered_once(client, worker, garbage_at, duplicates)


def test_a_ring_of_waits_is_a_deadlock_although_garbage_came_first(worker, client):
    a, b, c = ids("a", "b", "c")
    ring = [("w1", b, c), ("w2", c, a), ("w3", a, b)]
    waits = {
        wait: now_event("WaitStarted", wait_id=f"{wait}-{a}", waiter_agent_id=waiter, waits_for_agent_id=target)
        for wait, waiter, target in ring
    }
    # A deadlock report on the waits topic, naming the ring before it closes, would hide the real one.
    report = now_event(
        "DeadlockDetected",
        cycle=[a, b, c],
        wait_ids=[f"w3-{a}", f"w1-{a}", f"w2-{a}"],
        waits_started_at=[waits[w].occurred_at for w in ("w3", "w1", "w2")],
    )
    garbage_at = send_garbage(client, WAITS, a, waits["w3"], report)
    client.send(WAITS, b, waits["w1"])
    duplicates = client.send_records(WAITS, b, [encode(waits["w1"])])
    for wait, waiter, _ in ring[1:]:
        client.send(WAITS, waiter, waits[wait])
    found = client.read(ALERTS, lambda e: a in cycle_of(e), until=bool, timeout_s=10)
    assert [(e.cycle, e.wait_ids) for e in found] == [([a, b, c], report.wait_ids)]
    assert_dead_lettered_once(client, worker, garbage_at, duplicates)


def test_a_throttle_ends_at_its_window_although_garbage_came_after_it(worker, client):
    (agent,) = ids("spender")
    window_end = _wait_for_fresh_window()
    usage = now_event("TokensUsed", agent_id=agent, generation_id="g0", prompt_tokens=BUDGET, completion_tokens=200)
    client.send(USAGE, agent, usage)
    (exceeded,) = client.read(CONTROL, lambda e: agent_of(e) == agent, until=bool, timeout_s=10)
    assert isinstance(exceeded, BudgetExceeded)
    duplicates = client.send_records(USAGE, agent, [encode(usage)])
    # A restore on the usage topic, folded, would end the throttle early and the real restore would never be decided.
    early = now_event("BudgetRestored", agent_id=agent, window_start=window_end)
    garbage_at = send_garbage(client, USAGE, agent, usage, early)
    garbage_at |= send_garbage(client, CONTROL, agent, exceeded, usage)
    found = client.read(
        CONTROL,
        lambda e: isinstance(e, BudgetExceeded | BudgetRestored) and e.agent_id == agent,
        until=lambda e: len(e) >= 2,
        timeout_s=WINDOW_MS / 1000 + TIMER_SLACK_MS / 1000 + 2,
    )
    assert [e.name for e in found] == ["BudgetExceeded", "BudgetRestored"]
    assert window_end <= found[1].occurred_at <= window_end + TIMER_SLACK_MS
    assert_dead_lettered_once(client, worker, garbage_at, duplicates)


def test_an_experience_is_projected_although_garbage_came_first(worker, client, redis_url):
    (agent,) = ids("learner")
    experience = now_event(
        "ExperienceRecorded",
        experience_id=agent,
        agent_id=agent,
        node="n1",
        kind="insight",
        content="garbage in, nothing out",
        embedding=[0.5],
        ttl_s=600,
        mission_id=None,
    )
    usage = now_event("TokensUsed", agent_id=agent, generation_id="g", prompt_tokens=1, completion_tokens=1)
    garbage_at = send_garbage(client, EXPERIENCES, agent, experience, usage)
    duplicates = client.send_records(EXPERIENCES, agent, [encode(experience)] * 2)
    store = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 10
    while store.get(f"experience:{agent}") is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert store.get(f"experience:{agent}") is not None
    assert_dead_lettered_once(client, worker, garbage_at, duplicates)


def _wait_for_fresh_window() -> int:
    """Sleep until a budget window has just begun; its end in ms."""
    now_ms = time.time_ns() // 1_000_000
    start = now_ms - now_ms % WINDOW_MS
    if now_ms - start > WINDOW_MS / 4:
        time.sleep((start + WINDOW_MS - now_ms) / 1000 + 0.05)
        start += WINDOW_MS
    return start + WINDOW_MS
