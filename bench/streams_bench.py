"""Stream processors on a real broker: liveness, deadlock detection, events/s per processor, recovery after kill -9,
lag under a steady heartbeat load.

Starts the broker (Apache Kafka by default, or Tansu) and Redis itself, and runs `swarmlog streams` as a subprocess
(tests/streams/worker_harness.py). Five parts:
- liveness: real `swarmlog agent --brain scripted` processes (heartbeat 0.25 s) killed with SIGKILL in turn, under a
  2 s liveness timeout; kill → AgentDeclaredDead occurred_at, and → the death readable on swarm.agents.registry;
- deadlock: rings of three agents' WaitStarted, one wait at a time; the closing wait's ack → DeadlockDetected
  occurred_at and → readable on swarm.alerts, next to that wait's own ack → readable on swarm.waits (the baseline);
- throughput: a pre-encoded burst per processor (heartbeats → registry, TokensUsed → budgets, WaitStarted/WaitEnded →
  wait-for graph) sent with one aiokafka producer; the worker's rate is the burst over first send → the last write
  to its table's changelog (stamped when written; found once the worker's group has committed past the burst),
  next to a plain aiokafka consumer reading + decoding the same records (the baseline), and the worker's CPU time over
  the burst (events per CPU second: what one core would fold, however busy the machine);
- recovery: with the tables populated, kill -9 the worker, send a fresh agent's over-budget TokensUsed, restart it;
  restart → "Ready", and → BudgetExceeded (the new event processed);
- steady (not run unless named): N agents (2,000) heartbeating at 1 Hz for S seconds (30) through a worker with the
  default 5 s liveness timeout; the lag of each registry row write (heartbeat occurred_at → written to the changelog),
  the worker's CPU, and, for the agents that fall silent halfway, last heartbeat → AgentDeclaredDead.
Run: .venv/bin/python bench/streams_bench.py [--broker kafka|tansu] [--parts liveness,deadlock,throughput,recovery,steady]
     [--kills N] [--agents N] [--rings N] [--events N] [--processors registry,budgets,waitgraph] [--restarts N]
     [--steady-agents N] [--steady-s S] [--silenced N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from rich.console import Console
from rich.table import Table

from swarmlog import topics
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentHeartbeat,
    AgentRegistered,
    BudgetExceeded,
    DeadlockDetected,
    TokensUsed,
    WaitEnded,
    WaitStarted,
)
from swarmlog.services import open_broker, open_redis
from swarmlog.settings import Settings
from swarmlog.streams.app.grouped import group_of
from swarmlog.streams.app.tables import load_value
from swarmlog.streams.registry import DEFAULT_TIMEOUT_MS

sys.path[:0] = [
    str(Path(__file__).parents[1] / "tests" / "streams"),
    str(Path(__file__).parents[1] / "tests" / "actors"),
]
from agent_harness import start_agent
from worker_harness import Worker

REGISTRY, HEARTBEATS, USAGE, CONTROL, WAITS, ALERTS = (
    topics.REGISTRY,
    topics.HEARTBEATS,
    topics.USAGE,
    topics.CONTROL,
    topics.WAITS,
    topics.ALERTS,
)
REGION, FIRST_SLOT, LIVENESS_TIMEOUT_MS, HEARTBEAT_S = "region-0", 48, 2000, 0.25
FAKE_AGENTS, BUDGET_TOKENS = 50, 100_000


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch."""
    return time.time_ns() // 1_000_000


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def envelope(event_id: str, at_ms: int) -> dict[str, Any]:
    """An event envelope written by the bench."""
    return {"event_id": event_id, "occurred_at": at_ms, "producer": "bench"}


# ---- liveness -----------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Kill:
    """One agent killed: when, and when its death was decided and readable (epoch ms)."""

    agent_id: str
    killed_ms: int
    declared_ms: int
    read_ms: int


async def liveness(settings: Settings, workdir: Path, kills: int, at_once: int, console: Console) -> list[Kill]:
    """Kill `kills` scripted agents with SIGKILL, `at_once` running at a time; each kill's detection."""
    worker = Worker(
        settings.bootstrap,
        settings.broker,
        settings.redis_url,
        workdir / "liveness",
        liveness_timeout_ms=LIVENESS_TIMEOUT_MS,
    )
    results: list[Kill] = []
    async with Collector(settings, REGISTRY, start="end", fetch_max_wait_ms=20) as watch:
        await asyncio.to_thread(worker.start)
        try:
            while len(results) < kills:
                count = min(at_once, kills - len(results))
                ids = [f"live-{uuid.uuid4().hex[:6]}-{n}" for n in range(count)]
                agents = {
                    agent_id: start_agent(
                        settings,
                        agent_id,
                        FIRST_SLOT + n,
                        workdir,
                        "--region",
                        REGION,
                        "--brain",
                        "scripted",
                        "--heartbeat-s",
                        str(HEARTBEAT_S),
                    )
                    for n, agent_id in enumerate(ids)
                }
                try:
                    await watch.wait_for(lambda ids=ids: all(watch.named(AgentRegistered, agent_id=a) for a in ids), 90)
                    await asyncio.sleep(1.5)  # a few heartbeats folded
                    killed = {}
                    for agent_id, process in agents.items():
                        process.send_signal(signal.SIGKILL)
                        killed[agent_id] = now_ms()
                        await asyncio.sleep(0.3)  # spread the kills over the liveness timer's ticks
                    await watch.wait_for(
                        lambda ids=ids: all(watch.named(AgentDeclaredDead, agent_id=a) for a in ids),
                        LIVENESS_TIMEOUT_MS / 1000 + 30,
                    )
                finally:
                    for process in agents.values():
                        if process.poll() is None:
                            process.send_signal(signal.SIGKILL)
                        process.wait(30)
                for agent_id in ids:
                    death = watch.named(AgentDeclaredDead, agent_id=agent_id)[0]
                    read_at = watch.read_ms[death.event_id]
                    results.append(Kill(agent_id, killed[agent_id], death.occurred_at, read_at))
                console.print(f"  {len(results)}/{kills} kills detected")
        finally:
            worker.stop()
    return results


def liveness_table(kills: list[Kill], broker: str) -> Table:
    """Detection delay beyond the timeout, and the whole kill → death delays."""
    table = Table(
        title=f"liveness on {broker}: {len(kills)} scripted agents killed with SIGKILL "
        f"(timeout {LIVENESS_TIMEOUT_MS} ms, heartbeat {HEARTBEAT_S * 1000:.0f} ms, tick 500 ms)"
    )
    for column in ("measure", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    rows = {
        "kill → AgentDeclaredDead occurred_at, − timeout": [
            k.declared_ms - k.killed_ms - LIVENESS_TIMEOUT_MS for k in kills
        ],
        "kill → readable on swarm.agents.registry, − timeout": [
            k.read_ms - k.killed_ms - LIVENESS_TIMEOUT_MS for k in kills
        ],
        "kill → AgentDeclaredDead occurred_at": [k.declared_ms - k.killed_ms for k in kills],
    }
    for label, values in rows.items():
        table.add_row(label, *(f"{v:,.0f}" for v in (percentile(values, 50), percentile(values, 99), max(values))))
    within = sum(k.read_ms - k.killed_ms <= LIVENESS_TIMEOUT_MS + 1000 for k in kills)
    table.add_row("readable within timeout + 1 s", f"{within}/{len(kills)}", "", "")
    return table


# ---- deadlocks ----------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Ring:
    """One ring of three waits: when the wait that closed it was acknowledged, read back, and its deadlock decided."""

    closed_ms: int  # the broker's ack of the closing WaitStarted (the deadlock's causation)
    wait_read_ms: int  # the closing WaitStarted readable on swarm.waits (the baseline: transport alone)
    declared_ms: int  # DeadlockDetected occurred_at
    read_ms: int  # DeadlockDetected readable on swarm.alerts


async def deadlocks(settings: Settings, rings: int, console: Console) -> list[Ring]:
    """Send `rings` rings of three WaitStarted, one wait at a time; each ring's detection from its closing wait."""
    codec, results = default_codec(), []
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
    await producer.start()
    try:
        async with (
            Collector(settings, ALERTS, start="end", fetch_max_wait_ms=20) as alerts,
            Collector(settings, WAITS, start="end", fetch_max_wait_ms=20) as waits,
        ):
            for n in range(rings):
                run = uuid.uuid4().hex[:6]
                agents = [f"ring-{run}-{m}" for m in range(3)]
                acked = {}
                for m, waiter in enumerate(agents):
                    started = WaitStarted(
                        **envelope(f"ws-{run}-{m}", now_ms()),
                        wait_id=f"w-{run}-{m}",
                        waiter_agent_id=waiter,
                        waits_for_agent_id=agents[(m + 1) % 3],
                    )
                    await producer.send_and_wait(WAITS, codec.encode(started), key=waiter.encode())
                    acked[started.event_id] = now_ms()
                await alerts.wait_for(lambda run=run: _ring_alert(alerts, run) is not None, 30)
                alert = _ring_alert(alerts, run)
                trigger = alert.causation_id
                await waits.wait_for(lambda trigger=trigger: trigger in waits.read_ms, 30)
                results.append(
                    Ring(acked[trigger], waits.read_ms[trigger], alert.occurred_at, alerts.read_ms[alert.event_id])
                )
                if (n + 1) % 10 == 0:
                    console.print(f"  {n + 1}/{rings} rings detected")
                await asyncio.sleep(0.2)
    finally:
        await producer.stop()
    return results


def _ring_alert(alerts: Collector, run: str) -> DeadlockDetected | None:
    """The DeadlockDetected of one ring, by its agents' run id."""
    found = [e for e in alerts.named(DeadlockDetected) if any(run in agent for agent in e.cycle)]
    return found[0] if found else None


def deadlock_table(rings: list[Ring], broker: str) -> Table:
    """Detection delays from the closing wait's ack, next to that wait's own delay to be readable."""
    table = Table(
        title=f"deadlocks on {broker}: {len(rings)} rings of three agents, one WaitStarted at a time; "
        "from the broker's ack of the wait that closed the ring"
    )
    for column in ("measure", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    rows = {
        "→ DeadlockDetected occurred_at": [r.declared_ms - r.closed_ms for r in rings],
        "→ DeadlockDetected readable on swarm.alerts": [r.read_ms - r.closed_ms for r in rings],
        "baseline: → the closing wait readable on swarm.waits": [r.wait_read_ms - r.closed_ms for r in rings],
    }
    for label, values in rows.items():
        table.add_row(label, *(f"{v:,.0f}" for v in (percentile(values, 50), percentile(values, 99), max(values))))
    within = sum(r.read_ms - r.closed_ms <= 1000 for r in rings)
    table.add_row("readable within 1 s", f"{within}/{len(rings)}", "", "")
    return table


# ---- throughput ---------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Burst:
    """One processor's burst: what was sent, and how fast the worker and the baseline went through it."""

    processor: str
    events: int
    send_s: float
    worker_s: float  # first → last changelog write of the burst
    end_to_end_s: float  # first send → last changelog write
    baseline_s: float  # plain consumer: read + decode the same records
    cpu_s: float | None  # the worker process's CPU time from the first send until the burst was done


def burst_records(processor: str, count: int) -> list[tuple[str, str, bytes]]:
    """`count` pre-encoded (topic, key, value) records for a processor, timestamps from now, 50 agents."""
    codec, run, t0 = default_codec(), uuid.uuid4().hex[:6], now_ms()
    agents = [f"tp-{run}-{n}" for n in range(FAKE_AGENTS)]
    out: list[tuple[str, str, Event]] = []
    if processor == "registry":
        for n, agent in enumerate(agents):
            out.append(
                (
                    REGISTRY,
                    agent,
                    AgentRegistered(
                        **envelope(f"reg-{agent}", t0),
                        agent_id=agent,
                        capabilities=["code"],
                        model="m",
                        brain="scripted",
                        node="n",
                        region=REGION,
                        slot=n,
                    ),
                )
            )
        for n in range(count - FAKE_AGENTS):
            agent = agents[n % FAKE_AGENTS]
            out.append(
                (
                    HEARTBEATS,
                    agent,
                    AgentHeartbeat(
                        **envelope(f"hb-{run}-{n}", t0 + 1 + n // FAKE_AGENTS),
                        agent_id=agent,
                        registration_id=f"reg-{agent}",
                        sequence=n,
                        status="BUSY",
                        region=REGION,
                        slot=n % FAKE_AGENTS,
                    ),
                )
            )
    elif processor == "budgets":
        for n in range(count):
            agent = agents[n % FAKE_AGENTS]
            out.append(
                (
                    USAGE,
                    agent,
                    TokensUsed(
                        **envelope(f"tu-{run}-{n}", t0 + n // FAKE_AGENTS),
                        agent_id=agent,
                        generation_id=f"g-{n}",
                        prompt_tokens=30,
                        completion_tokens=20,
                    ),
                )
            )
    else:
        for n in range(count):
            waiter = agents[(n // 2) % FAKE_AGENTS]
            wait: dict[str, Any] = {
                "wait_id": f"w-{run}-{n // 2}",
                "waiter_agent_id": waiter,
                "waits_for_agent_id": agents[(n // 2 + 1) % FAKE_AGENTS],
            }
            if n % 2 == 0:
                out.append(
                    (
                        WAITS,
                        waiter,
                        WaitStarted(**envelope(f"ws-{run}-{n}", t0 + n), **wait),
                    )
                )
            else:
                out.append(
                    (
                        WAITS,
                        waiter,
                        WaitEnded(**envelope(f"we-{run}-{n}", t0 + n), **wait, outcome="ANSWERED"),
                    )
                )
    return [(topic, key, codec.encode(event)) for topic, key, event in out]


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds a process has used so far (Linux /proc); None where that cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def end_offsets(consumer: AIOKafkaConsumer, topics: list[str]) -> dict[TopicPartition, int]:
    """The end offset of every partition of `topics`."""
    await consumer._client.force_metadata_update()
    partitions = [TopicPartition(t, p) for t in topics for p in sorted(consumer.partitions_for_topic(t) or ())]
    return await consumer.end_offsets(partitions) if partitions else {}


async def committed_through(admin: AIOKafkaAdminClient, group: str, ends: dict[TopicPartition, int]) -> bool:
    """Whether the group has committed every partition up to the given end offsets."""
    committed = await admin.list_consumer_group_offsets(group, partitions=list(ends))  # Tansu needs them named
    return all(end == 0 or (tp in committed and committed[tp].offset >= end) for tp, end in ends.items())


async def changelog_span(
    bootstrap: str, topic: str, before: dict[TopicPartition, int], after: dict[TopicPartition, int]
) -> tuple[int, int, int]:
    """(count, first, last timestamp ms) of a changelog's records between two sets of end offsets."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    stamps: list[int] = []
    try:
        consumer.assign(list(after))
        for tp, _end in after.items():
            consumer.seek(tp, before.get(tp, 0))
        left = {tp for tp, end in after.items() if end > before.get(tp, 0)}
        while left:
            for tp, records in (await consumer.getmany(*left, timeout_ms=500)).items():
                stamps += [r.timestamp for r in records if r.offset < after[tp]]
                if records and records[-1].offset >= after[tp] - 1:
                    left.discard(tp)
    finally:
        await consumer.stop()
    return len(stamps), min(stamps), max(stamps)


async def baseline(bootstrap: str, before: dict[TopicPartition, int], after: dict[TopicPartition, int]) -> float:
    """Seconds for a plain aiokafka consumer to read and decode the records between two sets of end offsets."""
    codec = default_codec()
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        consumer.assign(list(after))
        for tp in after:
            consumer.seek(tp, before.get(tp, 0))
        left = {tp for tp, end in after.items() if end > before.get(tp, 0)}
        started = time.perf_counter()
        while left:
            for tp, records in (await consumer.getmany(*left, timeout_ms=500)).items():
                for record in records:
                    if record.offset < after[tp]:
                        codec.decode_record(record.value, tp.topic, tp.partition, record.offset)
                if records and records[-1].offset >= after[tp] - 1:
                    left.discard(tp)
        return time.perf_counter() - started
    finally:
        await consumer.stop()


PROCESSORS = ("registry", "budgets", "waitgraph")


async def throughput(
    settings: Settings, worker: Worker, events: int, processors: list[str], console: Console
) -> list[Burst]:
    """One burst per processor through the running worker, one after the other, and the baseline of each."""
    bootstrap, app = settings.bootstrap, worker.app_id
    assert worker.process is not None
    plans = {  # inputs, internal topics, the changelog, the group that folds them
        "registry": ([REGISTRY, HEARTBEATS], [], f"{app}-registry-changelog", group_of(app, "registry")),
        "budgets": ([USAGE], [], f"{app}-budgets-changelog", app),
        "waitgraph": ([WAITS], [f"{app}-waits-global"], f"{app}-waitgraph-changelog", app),
    }
    plans = {processor: plans[processor] for processor in processors}
    results = []
    probe = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, max_batch_size=256 * 1024)
    await probe.start()
    await admin.start()
    await producer.start()
    try:
        for processor, (inputs, internal, changelog, group) in plans.items():
            records = burst_records(processor, events)
            inputs_before = await end_offsets(probe, inputs)
            changelog_before = await end_offsets(probe, [changelog])
            cpu_before = cpu_seconds(worker.process.pid)
            started = time.perf_counter()
            sent_ms = now_ms()
            await asyncio.gather(
                *[await producer.send(topic, value, key=key.encode()) for topic, key, value in records]
            )
            send_s = time.perf_counter() - started
            inputs_after = await end_offsets(probe, inputs)
            # Done when the worker committed past the burst (internal topics too) and its changelog stopped growing.
            async with asyncio.timeout(600):
                while not await committed_through(admin, group, inputs_after):
                    await asyncio.sleep(0.25)
                while not await committed_through(admin, group, await end_offsets(probe, internal)):
                    await asyncio.sleep(0.25)
                changelog_after = await end_offsets(probe, [changelog])
                while True:
                    await asyncio.sleep(1.5)
                    latest = await end_offsets(probe, [changelog])
                    if latest == changelog_after:
                        break
                    changelog_after = latest
            cpu_after = cpu_seconds(worker.process.pid)
            cpu_s = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
            count, first, last = await changelog_span(bootstrap, changelog, changelog_before, changelog_after)
            base = await baseline(bootstrap, inputs_before, inputs_after)
            end_to_end_s = (last - sent_ms) / 1000
            burst = Burst(processor, len(records), send_s, max(last - first, 1) / 1000, end_to_end_s, base, cpu_s)
            results.append(burst)
            console.print(
                f"  {processor}: {len(records):,} events sent in {send_s:.2f} s, {count:,} changelog "
                f"writes over {burst.worker_s:.2f} s, last {burst.end_to_end_s:.2f} s after the first send; "
                f"baseline {base:.2f} s; worker CPU {cpu_s or 0:.2f} s"
            )
    finally:
        await producer.stop()
        await admin.close()
        await probe.stop()
    return results


def throughput_table(bursts: list[Burst], broker: str) -> Table:
    """Events/s per processor next to the plain read + decode rate of the same records."""
    table = Table(
        title=f"stream processors on {broker}: one pre-encoded burst each; worker = first send → its last "
        "changelog write; CPU = the worker's user + system time over the burst; baseline = plain aiokafka read + decode"
    )
    for column in (
        "processor",
        "events",
        "send s",
        "send → last write s",
        "worker ev/s",
        "worker CPU s",
        "ev per CPU s",
        "baseline ev/s",
        "× baseline",
    ):
        table.add_column(column, justify="left" if column == "processor" else "right")
    for b in bursts:
        table.add_row(
            b.processor,
            f"{b.events:,}",
            f"{b.send_s:.2f}",
            f"{b.end_to_end_s:.2f}",
            f"{b.events / b.end_to_end_s:,.0f}",
            "n/a" if b.cpu_s is None else f"{b.cpu_s:.2f}",
            "n/a" if not b.cpu_s else f"{b.events / b.cpu_s:,.0f}",
            f"{b.events / b.baseline_s:,.0f}",
            f"{b.baseline_s / b.end_to_end_s:.3f}",
        )
    return table


class TimedWorker(Worker):
    """The harness worker, remembering how long its last start took to reach Ready."""

    def start(self) -> None:
        started = time.monotonic()
        super().start()
        self.ready_s = time.monotonic() - started


# ---- steady -------------------------------------------------------------------------------------------------------

SLICES_PER_S = 20
"""Each second's heartbeats are sent in this many slices, every agent in one of them, as agents beating at 1 Hz do."""


@dataclasses.dataclass
class Steady:
    """A steady heartbeat load through a worker: what was sent, how late each row was written, what it cost, and how
    soon the agents that fell silent were declared dead."""

    agents: int
    seconds: float
    sent: int
    lags_ms: list[int]  # per registry changelog write of an alive agent: its last heartbeat's occurred_at → written
    cpu_s: float | None
    silenced: list[Kill]  # killed_ms = the agent's last heartbeat (at or before the moment it fell silent)


def heartbeat_record(codec: Any, run: str, agent: str, sequence: int) -> bytes:
    """An encoded heartbeat of the bench agent `agent` (registered by `burst_records`' registration), now."""
    beat = AgentHeartbeat(
        **envelope(f"hb-{run}-{agent}-{sequence}", now_ms()),
        agent_id=agent,
        registration_id=f"reg-{agent}",
        sequence=sequence,
        status="IDLE",
        region=REGION,
        slot=0,
    )
    return codec.encode(beat)


async def steady(
    settings: Settings, workdir: Path, agents: int, seconds: float, silenced: int, console: Console
) -> Steady:
    """`agents` agents heartbeating at 1 Hz for `seconds` through a worker with the default liveness timeout; the
    first `silenced` of them fall silent halfway (as if killed -9) and must be declared dead."""
    worker = TimedWorker(settings.bootstrap, settings.broker, settings.redis_url or "", workdir / "steady")
    await asyncio.to_thread(worker.start)
    assert worker.process is not None
    codec, run = default_codec(), uuid.uuid4().hex[:6]
    ids = [f"st-{run}-{n}" for n in range(agents)]
    registrations = [
        AgentRegistered(
            **envelope(f"reg-{agent}", now_ms()),
            agent_id=agent,
            capabilities=["code"],
            model="m",
            brain="scripted",
            node="n",
            region=REGION,
            slot=0,
        )
        for agent in ids
    ]
    changelog = f"{worker.app_id}-registry-changelog"
    probe = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all", linger_ms=5)
    await probe.start()
    await producer.start()
    last_beat: dict[str, int] = {}
    try:
        async with Collector(settings, REGISTRY, start="end", fetch_max_wait_ms=20) as watch:
            await asyncio.gather(
                *[await producer.send(REGISTRY, codec.encode(r), key=r.agent_id.encode()) for r in registrations]
            )
            changelog_before = await end_offsets(probe, [changelog])
            cpu_before, started, sent = cpu_seconds(worker.process.pid), time.monotonic(), 0
            silent_from, quiet = int(seconds * SLICES_PER_S / 2), ids[:silenced]
            for tick in range(int(seconds * SLICES_PER_S)):
                await asyncio.sleep(max(0.0, started + tick / SLICES_PER_S - time.monotonic()))
                due = ids[tick % SLICES_PER_S :: SLICES_PER_S]
                beating = due if tick < silent_from else [agent for agent in due if agent not in quiet]
                pending = []
                for agent in beating:
                    pending.append(
                        await producer.send(HEARTBEATS, heartbeat_record(codec, run, agent, tick), key=agent.encode())
                    )
                    last_beat[agent] = now_ms()
                sent += len(beating)
                await asyncio.gather(*pending)
                if tick % (5 * SLICES_PER_S) == 0:
                    console.print(f"  {tick / SLICES_PER_S:.0f} s: {sent:,} heartbeats sent")
            cpu_after = cpu_seconds(worker.process.pid)
            await watch.wait_for(lambda: all(watch.named(AgentDeclaredDead, agent_id=a) for a in quiet), 60)
            deaths = [watch.named(AgentDeclaredDead, agent_id=agent)[0] for agent in quiet]
            kills = [
                Kill(agent, last_beat[agent], death.occurred_at, watch.read_ms[death.event_id])
                for agent, death in zip(quiet, deaths, strict=True)
            ]
            lags = await changelog_lags(settings.bootstrap or "", changelog, changelog_before)
    finally:
        await producer.stop()
        await probe.stop()
        worker.stop()
    cpu_s = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return Steady(agents, seconds, sent, lags, cpu_s, kills)


async def changelog_lags(bootstrap: str, topic: str, before: dict[TopicPartition, int]) -> list[int]:
    """Per write of an alive agent's row to the registry changelog since `before`: written − its last heartbeat."""
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await consumer.start()
    try:
        after = await end_offsets(consumer, [topic])
        consumer.assign(list(after))
        for tp in after:
            consumer.seek(tp, before.get(tp, 0))
        left, lags = {tp for tp, end in after.items() if end > before.get(tp, 0)}, []
        while left:
            for tp, records in (await consumer.getmany(*left, timeout_ms=500)).items():
                for record in records:
                    view = load_value(record.value) if record.value is not None else None
                    if record.offset < after[tp] and view is not None and view.alive and view.last_sequence >= 0:
                        lags.append(record.timestamp - view.last_heartbeat_ms)
                if records and records[-1].offset >= after[tp] - 1:
                    left.discard(tp)
        return lags
    finally:
        await consumer.stop()


def steady_table(run: Steady, broker: str) -> Table:
    """The worker under a steady heartbeat load: rate, CPU, row lag, and deaths of the agents that fell silent."""
    table = Table(
        title=f"steady load on {broker}: {run.agents:,} agents heartbeating at 1 Hz for {run.seconds:.0f} s; "
        f"{len(run.silenced)} fall silent halfway (timeout {DEFAULT_TIMEOUT_MS} ms, tick 500 ms)"
    )
    for column in ("measure", "p50", "p99", "max"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    cpu = "n/a" if run.cpu_s is None else f"{100 * run.cpu_s / run.seconds:.0f} % of a core"
    table.add_row("heartbeats/s sent", f"{run.sent / run.seconds:,.0f}", "", "")
    table.add_row("worker CPU over the load", cpu, "", "")
    table.add_row(
        "lag ms: heartbeat occurred_at → its row written",
        *(f"{percentile(run.lags_ms, q):,.0f}" for q in (50, 99, 100)),
    )
    if run.silenced:
        rows = {
            "last heartbeat → AgentDeclaredDead occurred_at, − timeout, ms": [
                k.declared_ms - k.killed_ms - DEFAULT_TIMEOUT_MS for k in run.silenced
            ],
            "last heartbeat → readable on swarm.agents.registry, − timeout, ms": [
                k.read_ms - k.killed_ms - DEFAULT_TIMEOUT_MS for k in run.silenced
            ],
        }
        for label, values in rows.items():
            table.add_row(label, *(f"{percentile(values, q):,.0f}" for q in (50, 99, 100)))
        within = sum(k.read_ms - k.killed_ms <= DEFAULT_TIMEOUT_MS + 1000 for k in run.silenced)
        table.add_row("readable within timeout + 1 s", f"{within}/{len(run.silenced)}", "", "")
    return table


# ---- recovery -----------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Restart:
    """One kill -9 and restart of the worker, in seconds from the restart (and from the kill)."""

    ready_s: float
    processed_s: float
    kill_to_processed_s: float


async def recovery(settings: Settings, worker: TimedWorker, restarts: int, console: Console) -> list[Restart]:
    """kill -9 the worker, send an over-budget TokensUsed of a fresh agent, restart; time Ready and BudgetExceeded."""
    codec, results = default_codec(), []
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, acks="all")
    await producer.start()
    try:
        async with Collector(settings, CONTROL, start="end", fetch_max_wait_ms=20) as watch:
            for n in range(restarts):
                worker.stop(signal.SIGKILL)
                killed = time.monotonic()
                agent = f"fresh-{uuid.uuid4().hex[:6]}"
                await producer.send_and_wait(
                    USAGE,
                    codec.encode(
                        TokensUsed(
                            **envelope(f"tu-{agent}", now_ms()),
                            agent_id=agent,
                            generation_id=f"g-{agent}",
                            prompt_tokens=BUDGET_TOKENS,
                            completion_tokens=1,
                        )
                    ),
                    key=agent.encode(),
                )
                restarted = time.monotonic()
                ready = asyncio.create_task(asyncio.to_thread(worker.start))
                await watch.wait_for(lambda agent=agent: watch.named(BudgetExceeded, agent_id=agent), 600)
                processed = time.monotonic()
                await ready
                ready_at = worker.ready_s
                results.append(Restart(ready_at, processed - restarted, processed - killed))
                console.print(
                    f"  restart {n + 1}/{restarts}: Ready after {ready_at:.1f} s, BudgetExceeded after "
                    f"{processed - restarted:.1f} s"
                )
                await asyncio.sleep(3)  # let it commit and settle before the next kill
    finally:
        await producer.stop()
    return results


def recovery_table(restarts: list[Restart], broker: str) -> Table:
    """Restart → Ready and → first new event processed, p50 and max."""
    table = Table(title=f"worker recovery on {broker}: kill -9 with populated tables, restart, {len(restarts)} times")
    for column in ("measure", "p50 s", "max s"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    rows = {
        "restart → Ready": [r.ready_s for r in restarts],
        "restart → new event processed (BudgetExceeded readable)": [r.processed_s for r in restarts],
        "kill → new event processed": [r.kill_to_processed_s for r in restarts],
    }
    for label, values in rows.items():
        table.add_row(label, f"{percentile(values, 50):.1f}", f"{max(values):.1f}")
    return table


async def main(args: argparse.Namespace) -> None:
    console = Console(width=140)
    parts = set(args.parts.split(","))
    tables: list[Table] = []
    try:
        await run_parts(args, parts, tables, console)
    finally:  # the parts that finished are printed even when a later one fails
        for table in tables:
            console.print(table)


async def run_parts(args: argparse.Namespace, parts: set[str], tables: list[Table], console: Console) -> None:
    """Start the services, run the chosen parts and append each one's table."""
    with (
        open_broker(Settings(broker=args.broker)) as broker,
        open_redis(Settings()) as redis,
        tempfile.TemporaryDirectory() as tmp,
    ):
        settings = Settings(broker=args.broker, bootstrap=broker.bootstrap, redis_url=redis.url)
        await ensure_topics(settings)
        workdir = Path(tmp)
        console.print(f"{args.broker} at {broker.bootstrap}, Redis at {redis.url}")
        if "liveness" in parts:
            console.print(f"liveness: {args.kills} kills, {args.agents} agents at a time")
            tables.append(
                liveness_table(await liveness(settings, workdir, args.kills, args.agents, console), args.broker)
            )
        if "steady" in parts:
            console.print(f"steady: {args.steady_agents:,} agents at 1 Hz for {args.steady_s:.0f} s")
            run = await steady(settings, workdir, args.steady_agents, args.steady_s, args.silenced, console)
            tables.append(steady_table(run, args.broker))
        if parts & {"deadlock", "throughput", "recovery"}:
            worker = TimedWorker(
                broker.bootstrap,
                broker.kind,
                redis.url,
                workdir / "throughput",
                liveness_timeout_ms=600_000,
                budget_tokens=BUDGET_TOKENS,
            )
            await asyncio.to_thread(worker.start)
            console.print(f"worker ready in {worker.ready_s:.1f} s")
            try:
                if "deadlock" in parts:
                    console.print(f"deadlock: {args.rings} rings")
                    tables.append(deadlock_table(await deadlocks(settings, args.rings, console), args.broker))
                if "throughput" in parts:
                    console.print(f"throughput: {args.events:,} events per processor")
                    tables.append(
                        throughput_table(
                            await throughput(settings, worker, args.events, args.processors.split(","), console),
                            args.broker,
                        )
                    )
                if "recovery" in parts:
                    console.print(f"recovery: {args.restarts} kill -9 + restart")
                    tables.append(recovery_table(await recovery(settings, worker, args.restarts, console), args.broker))
            finally:
                if worker.process is not None and worker.process.poll() is None:
                    worker.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--parts", default="liveness,deadlock,throughput,recovery", help="comma-separated parts to run")
    parser.add_argument("--kills", type=int, default=20, help="agents killed with SIGKILL")
    parser.add_argument("--agents", type=int, default=5, help="agents running at a time in the liveness part")
    parser.add_argument("--rings", type=int, default=30, help="rings of three waits in the deadlock part")
    parser.add_argument("--events", type=int, default=20_000, help="events in each processor's burst")
    parser.add_argument("--processors", default=",".join(PROCESSORS), help="comma-separated throughput bursts")
    parser.add_argument("--steady-agents", type=int, default=2000, help="agents heartbeating in the steady part")
    parser.add_argument("--steady-s", type=float, default=30, help="seconds of steady load")
    parser.add_argument("--silenced", type=int, default=20, help="agents that fall silent halfway in the steady part")
    parser.add_argument("--restarts", type=int, default=3, help="kill -9 + restart repetitions")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main(parser.parse_args()))
