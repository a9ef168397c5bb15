"""The streams worker on real brokers: one worker per broker, each test on its own agents, SIGTERM last."""

from __future__ import annotations

import asyncio
import functools
import signal
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
import redis
from worker_harness import (
    Client,
    Worker,
    agent_of,
    cycle_of,
    heartbeat,
    now_event,
    registered,
    running_worker,
    tables_settled,
)

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentDeclaredDead
from swarmlog.streams.registry import Registry, evolve

TIMEOUT_MS = 2000
BUDGET = 1000
WINDOW_MS = 4000
TIMER_SLACK_MS = 3000  # how late a timer's decision may come here; the latency targets are measured in bench/


@pytest.fixture(scope="module")
def worker(broker, redis_url, tmp_path_factory) -> Iterator[Worker]:
    """A running worker with a short liveness timeout and budget window; killed if a test left it running."""
    with running_worker(
        broker.bootstrap,
        broker.kind,
        redis_url,
        tmp_path_factory.mktemp("streams") / "data",
        liveness_timeout_ms=TIMEOUT_MS,
        budget_tokens=BUDGET,
        budget_window_ms=WINDOW_MS,
    ) as started:
        yield started


@pytest.fixture
def client(broker) -> Client:
    return Client(broker.bootstrap)


MODULE_RUN = uuid.uuid4().hex[:6]


def ids(*names: str) -> list[str]:
    """Agent ids unique to one test and marked with this module's run, so tests share the broker unseen."""
    run = uuid.uuid4().hex[:6]
    return [f"{name}-{MODULE_RUN}-{run}" for name in names]


def of(*agents: str):
    return lambda event: agent_of(event) in agents


def test_silence_declares_one_death_within_the_timeout_and_deregistration_none(worker, client):
    quiet, leaving = ids("quiet", "leaving")
    runs = {agent: registered(agent) for agent in (quiet, leaving)}
    for agent, run in runs.items():
        client.send("swarm.agents.registry", agent, run)
    beats: dict[str, list[tuple[Event, int]]] = {agent: [] for agent in runs}  # (heartbeat, wall ms of its ack)
    for sequence in range(3):
        for agent, run in runs.items():
            beats[agent].append(
                client.send_now("swarm.agents.heartbeats", agent, functools.partial(heartbeat, agent, run, sequence))
            )
        time.sleep(0.3)
    client.send("swarm.agents.registry", leaving, now_event("AgentDeregistered", agent_id=leaving, reason="done"))
    deaths = client.read(
        "swarm.agents.registry",
        lambda e: isinstance(e, AgentDeclaredDead) and of(quiet, leaving)(e),
        until=lambda found: False,
        timeout_s=TIMEOUT_MS / 1000 + 4,
    )
    assert [(d.agent_id, d.registration_id) for d in deaths] == [(quiet, runs[quiet].event_id)]
    died_ms = deaths[0].occurred_at
    # Never while the log held a heartbeat younger than the timeout: every one acknowledged before the decision counts.
    newest_acked = max(beat.occurred_at for beat, acked_ms in beats[quiet] if acked_ms < died_ms)
    assert died_ms - newest_acked > TIMEOUT_MS
    # Then by the liveness timer, not later: a bound loose enough for a loaded CI machine; the target (timeout + 1 s)
    # is measured in bench/streams_bench.py --parts liveness.
    assert died_ms - beats[quiet][-1][0].occurred_at - TIMEOUT_MS <= TIMER_SLACK_MS


def test_a_ring_of_three_waits_is_one_deadlock_with_the_cycle_in_order(worker, client):
    a, b, c = ids("a", "b", "c")
    ring = [("w1", b, c), ("w2", c, a), ("w3", a, b)]
    waits = {
        wait: now_event("WaitStarted", wait_id=f"{wait}-{a}", waiter_agent_id=waiter, waits_for_agent_id=target)
        for wait, waiter, target in ring
    }
    for wait, waiter, _ in ring:
        client.send("swarm.waits", waiter, waits[wait])
    found = client.read("swarm.alerts", lambda e: a in cycle_of(e), until=bool, timeout_s=10)
    extra = client.read("swarm.alerts", lambda e: a in cycle_of(e), until=lambda _: False, timeout_s=1.5)
    assert len(found) == len(extra) == 1
    deadlock = found[0]
    assert (deadlock.cycle, deadlock.wait_ids) == ([a, b, c], [f"w3-{a}", f"w1-{a}", f"w2-{a}"])
    assert deadlock.waits_started_at == [waits[w].occurred_at for w in ("w3", "w1", "w2")]
    # Decided on the wait that closed the ring, once all three were in (the latency target: bench/streams_bench.py).
    closing = [w for w in waits.values() if w.event_id == deadlock.causation_id]
    assert len(closing) == 1 and found[0].occurred_at >= max(w.occurred_at for w in waits.values())


def test_usage_over_the_budget_throttles_then_restores_at_the_window_boundary(worker, client):
    (agent,) = ids("spender")
    window_end = _wait_for_fresh_window()
    for n in range(2):
        client.send(
            "swarm.usage",
            agent,
            now_event("TokensUsed", agent_id=agent, generation_id=f"g{n}", prompt_tokens=400, completion_tokens=200),
        )
    found = client.read("swarm.control", of(agent), until=lambda e: len(e) >= 2, timeout_s=WINDOW_MS / 1000 + 5)
    assert [e.name for e in found] == ["BudgetExceeded", "BudgetRestored"]
    exceeded, restored = found
    assert (exceeded.used, exceeded.budget) == (1200, BUDGET)
    assert exceeded.window_end == restored.window_start == window_end
    assert window_end <= restored.occurred_at <= window_end + TIMER_SLACK_MS


def test_a_garbage_record_becomes_a_dead_letter_and_processing_goes_on(worker, client):
    (agent,) = ids("garbled")
    garbage = b"not avro " + agent.encode()
    client.send(
        "swarm.usage",
        agent,
        garbage,
        now_event("TokensUsed", agent_id=agent, generation_id="g", prompt_tokens=BUDGET + 1, completion_tokens=0),
    )
    letters = client.read("swarm.deadletter", lambda e: e.payload == garbage, until=bool, timeout_s=10)
    assert [(l.origin_topic, l.error_type) for l in letters] == [("swarm.usage", "DecodeError")]
    throttled = client.read("swarm.control", of(agent), until=bool, timeout_s=10)
    assert [e.name for e in throttled][:1] == ["BudgetExceeded"]


def test_an_experience_is_projected_to_redis_with_its_expiry(worker, client, redis_url):
    (agent,) = ids("learner")
    experience = now_event(
        "ExperienceRecorded",
        experience_id=agent,
        agent_id=agent,
        node="n1",
        kind="insight",
        content="tests first",
        embedding=[0.5],
        ttl_s=600,
        mission_id=None,
    )
    client.send("swarm.memory.experiences", agent, experience)
    store = redis.Redis.from_url(redis_url)
    deadline = time.monotonic() + 10
    while store.get(f"experience:{agent}") is None and time.monotonic() < deadline:
        time.sleep(0.1)
    expire_at_ms = experience.occurred_at + 600_000
    assert store.get(f"experience:{agent}") is not None
    assert abs(store.pexpiretime(f"experience:{agent}") - expire_at_ms) <= 1


def test_sigterm_stops_cleanly_and_the_registry_table_is_the_fold_of_its_topics(worker, client, settings):
    # Its own agent, so the test stands alone; with the module's others, the table holds theirs too.
    (stopper,) = ids("stopper")
    run = registered(stopper)
    client.send("swarm.agents.registry", stopper, run)
    client.send("swarm.agents.heartbeats", stopper, heartbeat(stopper, run, 0))
    # Its death, the last event it will cause, is in before the table is compared.
    client.read(
        "swarm.agents.registry",
        lambda e: isinstance(e, AgentDeclaredDead) and of(stopper)(e),
        until=bool,
        timeout_s=TIMEOUT_MS / 1000 + TIMER_SLACK_MS / 1000 + 2,
    )
    # Once the changelog holds the fold of everything sent (the worker may still be folding the last heartbeats:
    # on Tansu under load a whole agent's were once not yet in), SIGTERM leaves exactly that fold in RocksDB.
    assert asyncio.run(tables_settled(settings, worker.app_id, MODULE_RUN, ("registry",))) == []
    assert worker.stop(signal.SIGTERM) == 0
    table = worker.table("registry")
    source = client.read("swarm.agents.registry", lambda e: True, until=lambda _: False, timeout_s=2)
    source += client.read("swarm.agents.heartbeats", lambda e: True, until=lambda _: False, timeout_s=2)
    by_agent: dict = {}
    for event in sorted(source, key=lambda e: e.occurred_at):
        agent = event.agent_id
        by_agent[agent] = evolve(_one(by_agent, agent), event).agents.get(agent)
    # Agents of other test modules may still be registering or beating on the shared broker after the stop.
    expected = {agent: view for agent, view in by_agent.items() if view is not None and MODULE_RUN in agent}
    assert {agent: view for agent, view in table.items() if MODULE_RUN in agent} == expected
    assert stopper in expected, "this test's agent is in the table"


def _one(views: dict, agent: str) -> Registry:
    return Registry({agent: views[agent]} if views.get(agent) else {})


def _wait_for_fresh_window() -> int:
    """Sleep until a budget window has just begun (so two usages land in it); its end in ms."""
    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    start = now_ms - now_ms % WINDOW_MS
    if now_ms - start > WINDOW_MS / 4:
        time.sleep((start + WINDOW_MS - now_ms) / 1000 + 0.05)
        start += WINDOW_MS
    return start + WINDOW_MS
