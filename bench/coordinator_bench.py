"""Coordinator latency and throughput on Apache Kafka, next to a raw aiokafka produce→consume round trip (the floor).

Starts Apache Kafka itself, then for 1 and 2 regions: one `swarmlog coordinator` process per region and in-process
agents (the real agent shell, scripted brain, zero latency). Measures
- submit → start: MissionSubmitted occurred_at → TaskStarted occurred_at, over serial one-task missions (an idle
  swarm: two hops, missions → coordinator → inbox → agent, plus the coordinator's transaction), and over every
  task of a burst mission (queueing included);
- assignments/s per region: TaskAssigned events in the journal over the burst mission's span.
Run: .venv/bin/python bench/coordinator_bench.py [--missions N] [--burst N] [--agents N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from rich.console import Console
from rich.table import Table

from swarmlog.actors.brains.scripted import ScriptedBrain
from swarmlog.actors.shell import Agent, AgentConfig
from swarmlog.coordinator.shell.recovery import JOURNAL
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.envelope import now_ms, stamp
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.codec import decode_record
from swarmlog.schemas.events import Event
from swarmlog.services import open_broker
from swarmlog.settings import Settings

TASKS_TOPIC = "swarm.tasks.events"
FLOOR_TOPIC = "bench.floor"
WARMUP = 5


def millis(value: int | datetime) -> int:
    """An occurred_at in epoch milliseconds, however the codec gave it."""
    return value if isinstance(value, int) else int(value.timestamp() * 1000)


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank."""
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
        await producer.partitions_for(FLOOR_TOPIC)  # metadata first, so the consumer finds the new topic
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


def task_starts(settings: Settings) -> Collector:
    """The TaskStarted events on the task events topic from now on, collected in the background."""
    return Collector(settings, TASKS_TOPIC, start="end", keep=lambda event: event.name == "TaskStarted")


async def started_at(observer: Collector, mission_id: str, tasks: int, timeout_s: float = 120) -> dict[str, int]:
    """TaskStarted occurred_at per task of a mission, once `tasks` of them have started."""
    by_task = lambda: {e.data["task_id"]: millis(e.data["occurred_at"])  # noqa: E731
                       for e in observer.named("TaskStarted", mission_id=mission_id)}
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
    specs = [{"task_id": f"t{i}", "prompt": f"do t{i}", "required_capabilities": [capability], "depends_on": [],
              "replicas": 1, "max_steps": 2} for i in range(tasks)]
    event = stamp("MissionSubmitted", producer="bench", correlation_id=mission_id, mission_id=mission_id,
                  title=mission_id, region=region, tasks=specs,
                  consensus={"strategy": "MAJORITY", "window_ms": 30_000, "quorum": 0.5}, submitted_by="bench")
    await producer.send("swarm.missions", event, key=mission_id)
    return mission_id, event.data["occurred_at"]


@dataclasses.dataclass
class RegionResult:
    """What one region measured."""

    serial: list[float]  # submit → start of one-task missions, ms
    burst: list[float]  # submit → start of each task of the burst mission, ms
    assignments_per_s: float


@contextlib.asynccontextmanager
async def region_up(settings: Settings, region: str, index: int, agents: int, workdir: Path) -> AsyncIterator[str]:
    """A coordinator process for the region and its in-process scripted agents; yields their capability."""
    capability = f"bench-{region}-{uuid.uuid4().hex[:6]}"
    with (workdir / f"coordinator-{region}.log").open("ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "swarmlog", "coordinator", "--region", region,
                                    "--bootstrap", settings.bootstrap, "--data-dir", str(workdir / "coordinator")],
                                   env={**os.environ, "SWARMLOG_BROKER": "kafka"}, stdout=log,
                                   stderr=subprocess.STDOUT)
    crew = [Agent(AgentConfig(agent_id=f"{capability}-{n}", capabilities=(capability,), brain="scripted",
                              model=None, gpu=None, node="bench", region=region, slot=16 * index + n,
                              data_dir=workdir / "agents"), settings, ScriptedBrain()) for n in range(agents)]
    running = [asyncio.create_task(agent.run()) for agent in crew]
    try:
        names = {f"{capability}-{n}" for n in range(agents)}
        async with asyncio.timeout(120):
            while not names <= {e.data["agent_id"] for e in await journal(settings, region)
                                if e.name == "AgentEnlisted"}:
                assert process.poll() is None, f"coordinator {region} exited; see {workdir}"
                await asyncio.sleep(0.5)
        yield capability
    finally:
        for agent in crew:
            agent.stop()
        await asyncio.gather(*running, return_exceptions=True)
        process.terminate()
        process.wait(30)


async def measure_region(settings: Settings, observer: Collector, region: str, capability: str, missions: int,
                         burst: int) -> RegionResult:
    """Serial one-task missions, then one burst mission, in one region."""
    serial = []
    async with EventProducer(settings, client_id=f"bench-client-{region}") as producer:
        for n in range(missions + WARMUP):
            mission_id, submitted = await submit(producer, region, capability, 1)
            started = await started_at(observer, mission_id, 1)
            if n >= WARMUP:
                serial.append(started["t0"] - submitted)
        mission_id, submitted = await submit(producer, region, capability, burst)
        started = await started_at(observer, mission_id, burst, timeout_s=300)
    assigned = sorted(millis(e.data["occurred_at"]) for e in await journal(settings, region)
                      if e.name == "TaskAssigned" and e.data["mission_id"] == mission_id)
    span_s = max(assigned[-1] - assigned[0], 1) / 1000
    return RegionResult(serial, [at - submitted for at in started.values()], (len(assigned) - 1) / span_s)


async def measure(settings: Settings, regions: list[str], agents: int, missions: int, burst: int,
                  workdir: Path) -> list[RegionResult]:
    """Run the regions side by side; one result each."""
    async with contextlib.AsyncExitStack() as stack:
        observer = await stack.enter_async_context(task_starts(settings))
        capabilities = [await stack.enter_async_context(region_up(settings, region, index, agents, workdir))
                        for index, region in enumerate(regions)]
        return list(await asyncio.gather(*(measure_region(settings, observer, region, capability, missions, burst)
                                           for region, capability in zip(regions, capabilities, strict=True))))


def table(floor_ms: list[float], runs: dict[str, list[RegionResult]], args: argparse.Namespace) -> Table:
    """Latency percentiles and assignment rates, each run next to the floor."""
    result = Table(title=f"coordinator on Apache Kafka: {args.agents} scripted agents (0 ms) per region, "
                         f"{args.missions} one-task missions, then a {args.burst}-task burst")
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
    for label, key in (("burst submit → start p50, ms", 50), ("burst submit → start p99, ms", 99)):
        cells = []
        for results in runs.values():
            cells += [f"{percentile([v for r in results for v in r.burst], key):.0f}", ""]
        result.add_row(label, "", *cells)
    cells = []
    for results in runs.values():
        rates = [r.assignments_per_s for r in results]
        cells += [" / ".join(f"{rate:.0f}" for rate in rates), ""]
    result.add_row("assignments/s per region", "", *cells)
    cells = []
    for results in runs.values():
        cells += [f"{sum(r.assignments_per_s for r in results):.0f}", ""]
    result.add_row("assignments/s, all regions", "", *cells)
    return result


async def main(args: argparse.Namespace) -> None:
    console = Console(width=120)
    with open_broker(Settings(broker="kafka")) as broker, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(broker="kafka", bootstrap=broker.bootstrap)
        await ensure_topics(settings)
        console.print(f"Apache Kafka at {broker.bootstrap}; floor: {args.missions} raw round trips")
        floor_ms = await floor(broker.bootstrap, args.missions)
        runs = {}
        for name, regions in (("1 region", ["region-0"]), ("2 regions", ["region-1", "region-2"])):
            console.print(f"{name}: {', '.join(regions)}")
            started = now_ms()
            runs[name] = await measure(settings, regions, args.agents, args.missions, args.burst, Path(tmp))
            console.print(f"  done in {(now_ms() - started) / 1000:.0f} s")
        console.print(table(floor_ms, runs, args))
        console.print(f"floor p50 {statistics.median(floor_ms):.1f} ms over {len(floor_ms)} round trips")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--missions", type=int, default=100, help="serial one-task missions per region")
    parser.add_argument("--burst", type=int, default=400, help="tasks in the burst mission per region")
    parser.add_argument("--agents", type=int, default=4, help="scripted agents per region")
    asyncio.run(main(parser.parse_args()))
