"""kill -9 of the streams worker at random moments while 2,000 events flow (10 times on Apache Kafka, 5 on Tansu).

After the flow, every table the restarted worker holds equals the pure fold of its source topics, computed by the
replay code (`swarmlog replay diff`'s own function), and every alert it owes was raised exactly once: a death per
silent agent, a deadlock per ring of waits, a throttle and a restore per agent driven over its budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import random
import re
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from worker_harness import (
    Client,
    Worker,
    agent_of,
    cycle_of,
    heartbeat,
    now_event,
    registered,
    table_differences,
    tables_settled,
)

from swarmlog.schemas.codec import encode
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentDeclaredDead, BudgetExceeded, BudgetRestored
from swarmlog.settings import Settings
from swarmlog.streams.app.grouped import CHANGELOG_CONFIGS

pytestmark = pytest.mark.slow
KILLS = {"kafka": 10, "tansu": 5}
EVENTS, AGENTS, RINGS, SPENDERS = 2000, 20, 6, 4
TIMEOUT_MS, BUDGET, WINDOW_MS = 2000, 1000, 4000


def traffic(run: str) -> list[tuple[str, str, Event]]:
    """EVENTS events in order: registrations, then heartbeats of every agent interleaved with rings of waits and usage."""
    agents = [f"chaos-{run}-{index}" for index in range(AGENTS)]
    registrations = {
        a: now_event(
            "AgentRegistered",
            agent_id=a,
            capabilities=["code"],
            model="m",
            brain="scripted",
            node="n1",
            gpu=None,
            region="r1",
            slot=0,
        )
        for a in agents
    }
    flow: list[tuple[str, str, Event]] = [("swarm.agents.registry", a, e) for a, e in registrations.items()]
    specials = [("swarm.waits", agents[3 * r + i], (r, i)) for r in range(RINGS) for i in range(3)]
    specials += [("swarm.usage", agents[s], s) for s in range(SPENDERS)]
    sequence = 0
    while len(flow) < EVENTS:
        if specials and sequence % 7 == 3:
            topic, key, what = specials.pop(0)
            flow.append((topic, key, _special(run, agents, topic, what)))
        else:
            agent = agents[sequence % AGENTS]
            flow.append(("swarm.agents.heartbeats", agent, ("beat", agent, registrations[agent].event_id, sequence)))
        sequence += 1
    return flow


def _special(run: str, agents: list[str], topic: str, what) -> Event:  # type: ignore[no-untyped-def]
    """A wait of a ring (ring r is agents 3r, 3r+1, 3r+2; each waits for the next) or a usage over the budget."""
    if topic == "swarm.waits":
        ring, member = what
        return now_event(
            "WaitStarted",
            wait_id=f"w-{run}-{ring}-{member}",
            waiter_agent_id=agents[3 * ring + member],
            waits_for_agent_id=agents[3 * ring + (member + 1) % 3],
        )
    return now_event(
        "TokensUsed",
        agent_id=agents[what],
        generation_id=f"g-{run}-{what}",
        prompt_tokens=BUDGET,
        completion_tokens=200,
    )


def stamped(item) -> Event:  # type: ignore[no-untyped-def]
    """The event to send now (heartbeats are stamped when sent, so liveness sees a live agent)."""
    if isinstance(item, tuple):
        _, agent, registration, sequence = item
        return now_event(
            "AgentHeartbeat",
            agent_id=agent,
            registration_id=registration,
            sequence=sequence,
            status="IDLE",
            in_flight_task=None,
            region="r1",
            slot=0,
        )
    return item


async def test_kill_9_while_events_flow_keeps_tables_equal_to_the_fold_and_every_alert_once(
    settings: Settings, tmp_path: Path
):
    run, kills = uuid.uuid4().hex[:6], KILLS.get(settings.broker, 5)
    chaos = random.Random()
    worker = Worker(
        settings.bootstrap,
        settings.broker,
        settings.redis_url,
        tmp_path / "data",
        liveness_timeout_ms=TIMEOUT_MS,
        budget_tokens=BUDGET,
        budget_window_ms=WINDOW_MS,
    )
    client = Client(settings.bootstrap)
    flow = traffic(run)
    chunk = len(flow) // (kills + 1) + 1
    await asyncio.to_thread(worker.start)
    try:
        for start in range(0, len(flow), chunk):
            for topic, key, item in flow[start : start + chunk]:
                await asyncio.to_thread(client.send, topic, key, stamped(item))
            if start + chunk < len(flow):
                await asyncio.sleep(chaos.uniform(0, 1.0))
                worker.stop(signal.SIGKILL)
                await asyncio.to_thread(worker.start)
        owed = await _alerts_owed(client, run)
        await tables_settled(settings, worker.app_id, run)  # its own last alerts folded back, e.g. a restore
    finally:
        if worker.process is not None and worker.process.poll() is None:
            assert worker.stop(signal.SIGTERM) == 0

    deaths, deadlocks, exceeded, restored = owed
    assert set(deaths) == {f"chaos-{run}-{index}" for index in range(AGENTS)} and set(deaths.values()) == {1}, deaths
    assert len(deadlocks) == RINGS and set(deadlocks.values()) == {1}, deadlocks
    assert set(exceeded.values()) == {1} and exceeded.keys() == restored.keys() and set(restored.values()) == {1}
    assert {agent for agent, _ in exceeded} == {f"chaos-{run}-{s}" for s in range(SPENDERS)}
    differences = await table_differences(settings, worker.app_id, run)
    assert not differences, differences[:3]


async def _alerts_owed(client: Client, run: str):  # type: ignore[no-untyped-def]
    """Deaths per agent, deadlocks per ring, throttles and restores per window: once all are there (or a minute on)."""
    ours = lambda event: run in (agent_of(event) or "") or any(run in a for a in cycle_of(event))
    deadline = time.monotonic() + TIMEOUT_MS / 1000 + 60
    while True:
        found = {
            topic: {e.event_id: e for e in await asyncio.to_thread(client.read, topic, ours, lambda _: False, 2)}
            for topic in ("swarm.agents.registry", "swarm.alerts", "swarm.control")
        }
        deaths = Counter(
            e.agent_id for e in found["swarm.agents.registry"].values() if isinstance(e, AgentDeclaredDead)
        )
        deadlocks = Counter(frozenset(e.wait_ids) for e in found["swarm.alerts"].values())
        control = found["swarm.control"].values()
        exceeded = Counter((e.agent_id, e.window_end) for e in control if isinstance(e, BudgetExceeded))
        restored = Counter((e.agent_id, e.window_start) for e in control if isinstance(e, BudgetRestored))
        complete = len(deaths) == AGENTS and len(deadlocks) == RINGS and len(restored) == SPENDERS
        if complete or time.monotonic() > deadline:
            return deaths, deadlocks, exceeded, restored


def test_a_worker_on_an_empty_data_dir_restores_its_tables_from_the_changelogs(settings: Settings, tmp_path: Path):
    # The first worker folds the registrations and heartbeats, and commits them at its stop; the second, the same
    # application on a new machine, never reads those inputs again. It can only know the agents from the registry's
    # changelog: it declares each of them dead.
    run = uuid.uuid4().hex[:6]
    first = Worker(
        settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "first", liveness_timeout_ms=600_000
    )
    client = Client(settings.bootstrap)
    first.start()
    try:
        for topic, key, item in traffic(run)[:200]:
            client.send(topic, key, stamped(item))
        asyncio.run(tables_settled(settings, first.app_id, run, ("registry",)))
    finally:
        assert first.stop(signal.SIGTERM) == 0
    written = {agent: view for agent, view in first.table("registry").items() if run in agent}
    assert len(written) == AGENTS and all(view.alive for view in written.values())
    second = Worker(
        settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "second", liveness_timeout_ms=TIMEOUT_MS
    )
    second.app_id = first.app_id  # the same application on a new machine: nothing local, everything in changelogs
    second.env["SWARMLOG_STREAMS_APP_ID"] = first.app_id
    second.start()
    try:
        deaths = client.read(
            "swarm.agents.registry",
            lambda e: isinstance(e, AgentDeclaredDead) and run in e.agent_id,
            until=lambda found: len({e.agent_id for e in found}) == AGENTS,
            timeout_s=60,
        )
    finally:
        assert second.stop(signal.SIGTERM) == 0
    assert {e.agent_id for e in deaths} == set(written)


def test_when_one_of_two_workers_is_killed_the_other_takes_its_partitions_and_every_death_comes_once(
    settings: Settings, tmp_path: Path
):
    # Two workers of one application share the registry's partitions. After kill -9 of one, the other is assigned
    # its partitions once its session ends, restores their rows from the changelog, and declares the silent agents
    # of every partition dead once; the agents that keep beating stay alive.
    run = uuid.uuid4().hex[:6]
    agents = [f"pair-{run}-{index}" for index in range(24)]
    silent = set(agents[::2])
    workers = [
        Worker(settings.bootstrap, settings.broker, settings.redis_url, tmp_path / name, liveness_timeout_ms=5000)
        for name in ("one", "two")
    ]
    workers[1].app_id = workers[0].app_id
    workers[1].env["SWARMLOG_STREAMS_APP_ID"] = workers[0].app_id
    client = Client(settings.bootstrap)
    ours = lambda e: isinstance(e, AgentDeclaredDead) and e.agent_id in agents
    with contextlib.ExitStack() as stack:
        for worker in workers:
            worker.start()
            stack.callback(lambda w=worker: w.process and w.process.poll() is None and w.stop(signal.SIGKILL))
        assert _shared(workers[1], settings.default_partitions), "the second worker holds some partitions, not all"
        # Stamped as sent: a registration made while the workers started (20 s and more on a busy machine) would be a
        # silence older than the timeout, and the agents that go on to beat could rightly be declared dead first.
        registrations = {agent: registered(agent) for agent in agents}
        for agent, registration in registrations.items():
            client.send("swarm.agents.registry", agent, registration)
        stack.enter_context(beating(settings.bootstrap, {a: r for a, r in registrations.items() if a not in silent}))
        time.sleep(3)  # folded and flushed by their owners
        workers[0].stop(signal.SIGKILL)
        client.read(
            "swarm.agents.registry", ours, until=lambda found: {e.agent_id for e in found} >= silent, timeout_s=90
        )
        time.sleep(3)  # a death decided twice would be written by now
        deaths = client.read("swarm.agents.registry", ours, until=lambda _: False, timeout_s=2)
        assert workers[1].stop(signal.SIGTERM) == 0
    assert Counter(e.agent_id for e in deaths) == Counter(silent)


@contextlib.contextmanager
def beating(bootstrap: str, registrations: dict[str, Event]) -> Iterator[None]:
    """The agents of `registrations` heartbeating once a second, on a thread, for the block."""
    stopped = threading.Event()

    async def beat() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap)
        await producer.start()
        try:
            for sequence in itertools.count():
                for agent, registration in registrations.items():
                    await producer.send(
                        "swarm.agents.heartbeats", encode(heartbeat(agent, registration, sequence)), key=agent.encode()
                    )
                await producer.flush()
                if stopped.wait(1):
                    return
        finally:
            await producer.stop()

    thread = threading.Thread(target=asyncio.run, args=(beat(),), daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join(10)


def _shared(worker: Worker, partitions: int, timeout_s: float = 60) -> bool:
    """Whether the worker's log says it restored some registry partitions and not all, within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        restored = re.findall(rb"registry: restored partitions \[([0-9, ]*)\]", worker.log.read_bytes())
        if restored and 0 < len(restored[-1].split(b",")) < partitions:
            return True
        time.sleep(0.5)
    return False


@pytest.mark.kafka_only
def test_a_changelog_made_before_group_folds_gets_their_compaction_at_the_next_start(
    settings: Settings, tmp_path: Path
):
    # Faust made the registry's changelog with Kafka's 7-day segments, which compaction never touches before they
    # roll: a restore would read them whole. A worker of this version sets the segments it relies on.
    worker = Worker(settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "data")
    changelog = f"{worker.app_id}-registry-changelog"
    asyncio.run(
        _create(
            settings, NewTopic(changelog, settings.default_partitions, 1, topic_configs={"cleanup.policy": "compact"})
        )
    )
    assert asyncio.run(_configs(settings, changelog)).get("segment.ms") != CHANGELOG_CONFIGS["segment.ms"]
    worker.start()
    assert worker.stop(signal.SIGTERM) == 0
    configs = asyncio.run(_configs(settings, changelog))
    assert {key: configs[key] for key in CHANGELOG_CONFIGS} == CHANGELOG_CONFIGS


async def _create(settings: Settings, topic: NewTopic) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([topic])
    finally:
        await admin.close()


async def _configs(settings: Settings, topic: str) -> dict[str, str]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    finally:
        await admin.close()
    return {entry[0]: entry[1] for entry in response.resources[0][4]}
