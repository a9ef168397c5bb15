"""Coordinator latency and throughput on Apache Kafka, next to a raw aiokafka produce→consume round trip (the floor).

Starts Apache Kafka itself, then for 1 and 2 regions: one `swarmlog coordinator` process per region and its agents,
all started at once. Agents are either in-process agent shells (the real `AgentProcess`, scripted brain, zero latency;
the default) or, with --simulated, bench/agent_simulator.py: per region one consumer over all its simulated agents'
inbox partitions and one producer writing their TaskStarted/TaskCompleted/VoteCast (the real event classes and codec)
at once, so that hundreds of agents cost the bench little and the coordinator is what is measured. Every agent of the
run has its own inbox slot (region i's agent n has slot i * agents + n; the inbox gets as many partitions as that
needs). Measures
- enlistment: the agents' start → the last of their AgentEnlisted in the region's journal;
- submit → start: MissionSubmitted occurred_at → TaskStarted occurred_at, over serial one-task missions on an idle
  swarm (each submitted IDLE_PAUSE_S after the previous one started: two hops, missions → coordinator → inbox →
  agent, plus the coordinator's journal write), split at the coordinator's decision (TaskAssigned occurred_at), and
  over every task of a burst mission (queueing included);
- with --simulated, re-dispatch under load: an agent's TaskCompleted → its next TaskStarted while the burst queues;
- assignments/s per region: TaskAssigned events in the journal over the burst mission's span;
- the bench's own event-loop lag while it measures (how late a 100 ms sleep wakes): all agents share that loop, so a
  high lag means the harness, not the coordinator, set the pace.
BENCH_PROFILE_DIR=<dir> runs each coordinator under cProfile (coordinator-<region>.prof, written when it stops).
Run: .venv/bin/python bench/coordinator_bench.py [--missions N] [--burst N] [--agents N] [--simulated]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import TypeVar

from agent_simulator import SimulatedAgents  # bench/: the script's own directory
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import UnknownTopicOrPartitionError
from rich.console import Console
from rich.table import Table

from swarmlog import topics
from swarmlog.actors.brains.scripted import ScriptedBrain
from swarmlog.actors.shell.agent import AgentConfig, AgentProcess
from swarmlog.coordinator.shell.recovery import JOURNAL
from swarmlog.envelope import now_ms, stamp
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import decode_record
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentEnlisted, ConsensusSpec, MissionSubmitted, TaskAssigned, TaskSpec, TaskStarted
from swarmlog.services import open_broker
from swarmlog.settings import Settings

T = TypeVar("T")
FLOOR_TOPIC = "bench.floor"
WARMUP = 5
RUNS = {"1 region": ("region-0",), "2 regions": ("region-1", "region-2")}
ENLIST_TIMEOUT_S = 120
LAG_TICK_S = 0.1
IDLE_PAUSE_S = 0.25
PROFILE_DIR = Path(os.environ["BENCH_PROFILE_DIR"]) if os.environ.get("BENCH_PROFILE_DIR") else None


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank; NaN of none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


async def floor(bootstrap: str, count: int) -> list[float]:
    """Raw aiokafka round trips in ms: send_and_wait (acks=all, idempotent) → the record polled by a consumer."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    with contextlib.suppress(Exception):  # already there
        await admin.create_topics([NewTopic(FLOOR_TOPIC, 1, 1)])
    await admin.close()
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    await producer.start()
    await consumer.start()
    tp = TopicPartition(FLOOR_TOPIC, 0)
    try:
        async with asyncio.timeout(60):  # metadata first, so the consumer finds the new topic (slow on a busy broker)
            while True:
                with contextlib.suppress(UnknownTopicOrPartitionError):
                    await producer.partitions_for(FLOOR_TOPIC)
                    break
        consumer.assign([tp])
        await consumer.seek_to_end(tp)
        await consumer.position(tp)
        rounds = []
        for n in range(count + WARMUP):
            started = time.perf_counter()
            await producer.send_and_wait(FLOOR_TOPIC, str(n).encode(), partition=0)
            while not (await consumer.getmany(tp, timeout_ms=1000)).get(tp):
                pass
            rounds.append((time.perf_counter() - started) * 1000)
        return rounds[WARMUP:]
    finally:
        await consumer.stop()
        await producer.stop()


def bench_settings(bootstrap: str, agents: int) -> Settings:
    """A region for every region of RUNS, and an inbox partition for every agent of every region."""
    regions = len({region for names in RUNS.values() for region in names})
    return Settings(
        broker="kafka",
        bootstrap=bootstrap,
        regions=regions,
        inbox_partitions=max(Settings().inbox_partitions, regions * agents),
    )


def task_starts(settings: Settings) -> Collector:
    """The TaskStarted events on the task events topic from now on, collected in the background."""
    return Collector(settings, topics.TASK_EVENTS, start="end", keep=lambda event: isinstance(event, TaskStarted))


async def started_at(observer: Collector, mission_id: str, tasks: int, timeout_s: float = 120) -> dict[str, int]:
    """TaskStarted occurred_at per task of a mission, once `tasks` of them have started."""
    by_task = lambda: {e.task_id: e.occurred_at for e in observer.named(TaskStarted, mission_id=mission_id)}
    await observer.wait_for(lambda: len(by_task()) >= tasks, timeout_s)
    return by_task()


async def journal(settings: Settings, region: str) -> list[Event]:
    """A region's committed journal partition, decoded."""
    tp = TopicPartition(JOURNAL, settings.region_names.index(region))
    consumer = reader(settings, f"bench-journal-{region}", True)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        return [decode_record(r.value, JOURNAL, r.partition, r.offset) async for r in records_to_end(consumer, tp)]
    finally:
        await consumer.stop()


async def submit(producer: EventProducer, region: str, capability: str, tasks: int) -> tuple[str, int]:
    """Submit a mission of `tasks` independent tasks; its id and MissionSubmitted occurred_at."""
    mission_id = f"bench-{uuid.uuid4().hex[:10]}"
    specs = [
        TaskSpec(task_id=f"t{i}", prompt=f"do t{i}", required_capabilities=[capability], max_steps=2)
        for i in range(tasks)
    ]
    event = stamp(
        MissionSubmitted,
        producer="bench",
        correlation_id=mission_id,
        mission_id=mission_id,
        title=mission_id,
        region=region,
        tasks=specs,
        consensus=ConsensusSpec(strategy="MAJORITY", window_ms=30_000, quorum=0.5),
        submitted_by="bench",
    )
    await producer.send(topics.MISSIONS, event, key=mission_id)
    return mission_id, event.occurred_at


@dataclasses.dataclass
class Crew:
    """A region's agents as the measurement sees them: their capability, how long they took to enlist, and how to wait
    for a mission's TaskStarted (occurred_at per task); the simulator, when they are simulated."""

    capability: str
    enlist_s: float
    wait_started: Callable[[str, int, float], Awaitable[dict[str, int]]]
    simulated: SimulatedAgents | None = None


@dataclasses.dataclass
class RegionResult:
    """What one region measured."""

    enlist_s: float  # the agents' start → all of them enlisted
    serial: list[float]  # submit → start of one-task missions, ms
    decided: list[float]  # submit → the coordinator's decision (TaskAssigned occurred_at) of those missions, ms
    burst: list[float]  # submit → start of each task of the burst mission, ms
    assignments_per_s: float
    redispatch: list[float]  # simulated agents: an agent's TaskCompleted → its next TaskStarted in the burst, ms


async def enlisted(
    settings: Settings,
    region: str,
    running: dict[str, asyncio.Task[None]],
    process: subprocess.Popen[bytes],
    workdir: Path,
    since: float | None = None,
) -> float:
    """Seconds (from `since`, else now) until every running agent is enlisted in the region's journal; fails as soon
    as one of them or the coordinator stops."""
    started = time.monotonic() if since is None else since
    async with asyncio.timeout(ENLIST_TIMEOUT_S):
        while not running.keys() <= {
            e.agent_id for e in await journal(settings, region) if isinstance(e, AgentEnlisted)
        }:
            assert process.poll() is None, f"coordinator {region} exited; see {workdir}"
            for agent_id, task in running.items():
                if task.done():
                    raise RuntimeError(f"agent {agent_id} stopped before it enlisted") from task.exception()
            await asyncio.sleep(0.5)
    return time.monotonic() - started


async def while_alive(process: subprocess.Popen[bytes], region: str, workdir: Path, waiting: Awaitable[T]) -> T:
    """What `waiting` returns; RuntimeError as soon as the region's coordinator process exits first."""
    task = asyncio.ensure_future(waiting)
    while not task.done():
        if process.poll() is not None:
            task.cancel()
            raise RuntimeError(
                f"coordinator {region} exited with {process.returncode} while the bench waited; see {workdir}"
            )
        await asyncio.wait([task], timeout=0.5)
    return task.result()


@contextlib.contextmanager
def coordinator(settings: Settings, region: str, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    """A `swarmlog coordinator` process for the region, logging under workdir, terminated when the block ends; under
    cProfile when PROFILE_DIR is set (its profile written there when it stops)."""
    profiled = ["-m", "cProfile", "-o", str(PROFILE_DIR / f"coordinator-{region}.prof")] if PROFILE_DIR else []
    with (workdir / f"coordinator-{region}.log").open("ab") as log:
        process = subprocess.Popen(
            [
                sys.executable,
                *profiled,
                "-m",
                "swarmlog",
                "coordinator",
                "--region",
                region,
                "--bootstrap",
                settings.bootstrap,
                "--data-dir",
                str(workdir / "coordinator"),
            ],
            env={
                **os.environ,
                "SWARMLOG_BROKER": "kafka",
                "SWARMLOG_REGIONS": str(settings.regions),
                "SWARMLOG_INBOX_PARTITIONS": str(settings.inbox_partitions),
            },
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(30)


@contextlib.asynccontextmanager
async def region_up(settings: Settings, region: str, agents: int, workdir: Path) -> AsyncIterator[Crew]:
    """A coordinator process for the region and its in-process scripted agents, started at once."""
    capability = f"bench-{region}-{uuid.uuid4().hex[:6]}"
    first_slot = settings.region_names.index(region) * agents
    with coordinator(settings, region, workdir) as process:
        crew = {
            f"{capability}-{n}": AgentProcess(
                AgentConfig(
                    agent_id=f"{capability}-{n}",
                    capabilities=(capability,),
                    brain="scripted",
                    model=None,
                    gpu=None,
                    node="bench",
                    region=region,
                    slot=first_slot + n,
                    data_dir=workdir / "agents",
                ),
                settings,
                ScriptedBrain(),
            )
            for n in range(agents)
        }
        running = {agent_id: asyncio.create_task(agent.run()) for agent_id, agent in crew.items()}
        try:
            enlist_s = await enlisted(settings, region, running, process, workdir)
            async with task_starts(settings) as observer:
                yield Crew(
                    capability,
                    enlist_s,
                    lambda mission, tasks, timeout: while_alive(
                        process, region, workdir, started_at(observer, mission, tasks, timeout)
                    ),
                )
        finally:
            for agent in crew.values():
                agent.stop()
            await asyncio.gather(*running.values(), return_exceptions=True)


@contextlib.asynccontextmanager
async def simulated_region_up(settings: Settings, region: str, agents: int, workdir: Path) -> AsyncIterator[Crew]:
    """A coordinator process for the region and its simulated agents (bench/agent_simulator.py)."""
    capability = f"bench-{region}-{uuid.uuid4().hex[:6]}"
    first_slot = settings.region_names.index(region) * agents
    with coordinator(settings, region, workdir) as process:
        started = time.monotonic()
        async with SimulatedAgents(settings, region, capability, agents, first_slot) as simulated:
            running = {agent_id: simulated.task for agent_id in simulated.agent_ids}
            await enlisted(settings, region, running, process, workdir, since=started)
            yield Crew(
                capability,
                time.monotonic() - started,
                lambda mission, tasks, timeout: while_alive(
                    process, region, workdir, simulated.wait_started(mission, tasks, timeout)
                ),
                simulated,
            )


@contextlib.asynccontextmanager
async def loop_lag() -> AsyncIterator[list[float]]:
    """How late, in ms, each LAG_TICK_S sleep of this event loop woke up while the block ran."""
    lags: list[float] = []

    async def sample() -> None:
        while True:
            started = time.perf_counter()
            await asyncio.sleep(LAG_TICK_S)
            lags.append((time.perf_counter() - started - LAG_TICK_S) * 1000)

    sampler = asyncio.create_task(sample())
    try:
        yield lags
    finally:
        sampler.cancel()


async def measure_region(settings: Settings, region: str, crew: Crew, missions: int, burst: int) -> RegionResult:
    """Serial one-task missions, then one burst mission, in one region."""
    serial, submitted_at = [], {}
    async with EventProducer(settings, client_id=f"bench-client-{region}") as producer:
        for n in range(missions + WARMUP):
            await asyncio.sleep(IDLE_PAUSE_S)  # the previous mission's completion and ballot are decided by then
            mission_id, submitted = await submit(producer, region, crew.capability, 1)
            started = await crew.wait_started(mission_id, 1, 120)
            if n >= WARMUP:
                serial.append(started["t0"] - submitted)
                submitted_at[mission_id] = submitted
        if crew.simulated is not None:
            crew.simulated.redispatch_ms.clear()  # from here on: agents finishing while the burst queues
        mission_id, submitted = await submit(producer, region, crew.capability, burst)
        started = await crew.wait_started(mission_id, burst, 600)
    journaled = await journal(settings, region)
    decided = [
        e.occurred_at - submitted_at[e.mission_id]
        for e in journaled
        if isinstance(e, TaskAssigned) and e.mission_id in submitted_at
    ]
    assigned = sorted(e.occurred_at for e in journaled if isinstance(e, TaskAssigned) and e.mission_id == mission_id)
    span_s = max(assigned[-1] - assigned[0], 1) / 1000
    redispatch = list(map(float, crew.simulated.redispatch_ms)) if crew.simulated is not None else []
    return RegionResult(
        crew.enlist_s,
        serial,
        decided,
        [at - submitted for at in started.values()],
        (len(assigned) - 1) / span_s,
        redispatch,
    )


async def measure(
    settings: Settings, regions: tuple[str, ...], args: argparse.Namespace, workdir: Path
) -> tuple[list[RegionResult], float]:
    """Run the regions side by side; one result each, and the event loop's p99 lag while they measured."""
    up = simulated_region_up if args.simulated else region_up
    async with contextlib.AsyncExitStack() as stack:
        crews = [await stack.enter_async_context(up(settings, region, args.agents, workdir)) for region in regions]
        async with loop_lag() as lags:
            results = await asyncio.gather(
                *(
                    measure_region(settings, region, crew, args.missions, args.burst)
                    for region, crew in zip(regions, crews, strict=True)
                )
            )
        return list(results), percentile(lags, 99)


def table(
    floor_ms: list[float], runs: dict[str, list[RegionResult]], lag_ms: dict[str, float], args: argparse.Namespace
) -> Table:
    """Latency percentiles and assignment rates, each run next to the floor."""
    result = Table(
        title=f"coordinator on Apache Kafka: {args.agents} {'simulated' if args.simulated else 'scripted'} agents "
        "(0 ms) per region, "
        f"{args.missions} one-task missions, then a {args.burst}-task burst"
    )
    result.add_column("measure")
    result.add_column("raw aiokafka (floor)", justify="right")
    for name in runs:
        result.add_column(name, justify="right")
        result.add_column("× floor", justify="right")
    for label, key in (("submit → start p50, ms", 50), ("submit → start p99, ms", 99)):
        base = percentile(floor_ms, key)
        cells = []
        for results in runs.values():
            value = percentile([v for r in results for v in r.serial], key)
            cells += [f"{value:.0f}", f"{value / base:.1f}x"]
        result.add_row(label, f"{base:.1f}", *cells)
    for label, key in (("submit → decided p50, ms", 50), ("submit → decided p99, ms", 99)):
        add_row(
            result,
            label,
            runs,
            lambda results, key=key: f"{percentile([v for r in results for v in r.decided], key):.0f}",
        )
    for label, key in (("burst submit → start p50, ms", 50), ("burst submit → start p99, ms", 99)):
        add_row(
            result,
            label,
            runs,
            lambda results, key=key: f"{percentile([v for r in results for v in r.burst], key):.0f}",
        )
    if args.simulated:
        for label, key in (("re-dispatch under load p50, ms", 50), ("re-dispatch under load p99, ms", 99)):
            add_row(
                result,
                label,
                runs,
                lambda results, key=key: f"{percentile([v for r in results for v in r.redispatch], key):.0f}",
            )
    add_row(
        result,
        "assignments/s per region",
        runs,
        lambda results: " / ".join(f"{r.assignments_per_s:.0f}" for r in results),
    )
    add_row(
        result, "assignments/s, all regions", runs, lambda results: f"{sum(r.assignments_per_s for r in results):.0f}"
    )
    add_row(
        result, "all agents enlisted after, s", runs, lambda results: " / ".join(f"{r.enlist_s:.1f}" for r in results)
    )
    result.add_row("bench event-loop lag p99, ms", "", *(text for name in runs for text in (f"{lag_ms[name]:.0f}", "")))
    return result


def add_row(
    result: Table, label: str, runs: dict[str, list[RegionResult]], cell: Callable[[list[RegionResult]], str]
) -> None:
    """A row with no floor: one cell per run, from its regions' results."""
    result.add_row(label, "", *(text for results in runs.values() for text in (cell(results), "")))


async def main(args: argparse.Namespace) -> None:
    console = Console(width=120)
    tmp = tempfile.mkdtemp(prefix="coordinator-bench-")  # kept: the coordinators' logs
    console.print(f"coordinator logs under {tmp}")
    with open_broker(Settings(broker="kafka")) as broker:
        settings = bench_settings(broker.bootstrap, args.agents)
        await ensure_topics(settings)
        console.print(f"Apache Kafka at {broker.bootstrap}; floor: {args.missions} raw round trips")
        floor_ms = await floor(broker.bootstrap, args.missions)
        runs, lag_ms = {}, {}
        for name, regions in RUNS.items():
            console.print(f"{name}: {', '.join(regions)}")
            started = now_ms()
            runs[name], lag_ms[name] = await measure(settings, regions, args, Path(tmp))
            console.print(f"  done in {(now_ms() - started) / 1000:.0f} s")
        console.print(table(floor_ms, runs, lag_ms, args))
        console.print(f"floor p50 {statistics.median(floor_ms):.1f} ms over {len(floor_ms)} round trips")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missions", type=int, default=100, help="serial one-task missions per region")
    parser.add_argument("--burst", type=int, default=400, help="tasks in the burst mission per region")
    parser.add_argument("--agents", type=int, default=4, help="agents per region")
    parser.add_argument(
        "--simulated",
        action="store_true",
        help="simulated agents (bench/agent_simulator.py: one consumer and producer for all) instead of agent shells",
    )
    asyncio.run(main(parser.parse_args()))
