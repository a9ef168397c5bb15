"""Where an idle dispatch's time goes, hop by hop, on Apache Kafka, next to a raw aiokafka round trip (the floor).

The broker stamps every record on the path (message.timestamp.type=LogAppendTime on swarm.missions, the journal, the
inbox and swarm.tasks.events), so MissionSubmitted → TaskStarted splits into: the client's send (its stamp → the
broker's append), the coordinator's fetch and decision (→ TaskAssigned occurred_at), its journal write (→ the journal
append), its inbox write after the journal's ack (→ the inbox append) and the agent's pickup (→ TaskStarted
occurred_at). One coordinator and one fleet host of scripted agents run as processes, as bench/swarm_bench.py starts
them; the missions are its idle ones (serial one-task missions, each sent once fewer than half the agents are busy).
Run: .venv/bin/python bench/dispatch_hops_bench.py [--agents 8] [--missions 40] [--median-ms 50]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import tempfile
from pathlib import Path

import swarm_bench  # bench/: the script's own directory
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from coordinator_bench import floor
from rich.console import Console
from rich.table import Table
from streams_bench import percentile

from swarmlog import topics
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import decode_record
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import MissionSubmitted, TaskAssigned, TaskStarted
from swarmlog.services import open_broker, open_redis
from swarmlog.settings import Settings
from swarmlog.topics import spec_for

STAMPED = (topics.MISSIONS, topics.JOURNAL, topics.INBOX, topics.TASK_EVENTS)
HOPS = (
    "client stamp → broker append (swarm.missions)",
    "→ the coordinator's decision (TaskAssigned occurred_at)",
    "→ its journal append",
    "→ its inbox append (after the journal's ack)",
    "→ the agent's TaskStarted (occurred_at)",
)


async def appended(settings: Settings, topic: str, kind: type[Event]) -> dict[str, tuple[Event, int]]:
    """Every `kind` event of the topic by mission id, with the broker's append time (the first, where repeated)."""
    consumer = reader(settings, "bench-dispatch-hops", True)
    await consumer.start()
    found: dict[str, tuple[Event, int]] = {}
    try:
        for partition in range(spec_for(settings, topic).partitions):
            tp = TopicPartition(topic, partition)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            async for record in records_to_end(consumer, tp):
                event = decode_record(record.value or b"", topic, partition, record.offset)
                if isinstance(event, kind):
                    found.setdefault(getattr(event, "mission_id", ""), (event, record.timestamp))
    finally:
        await consumer.stop()
    return found


async def run(args: argparse.Namespace, console: Console) -> tuple[list[float], list[list[int]]]:
    """The floor's round trips, and each idle mission's hops in ms."""
    scenario = swarm_bench.Scenario("d", args.agents, 1, 1, 1, 1, args.median_ms, 0.3, 30_000, False, 1)
    workdir = Path(tempfile.mkdtemp(prefix="dispatch-hops-"))
    with open_broker(Settings(broker="kafka")) as broker, open_redis(Settings()) as redis:
        settings = Settings(
            broker="kafka",
            bootstrap=broker.bootstrap,
            redis_url=redis.url,
            regions=1,
            inbox_partitions=max(Settings().inbox_partitions, args.agents),
        )
        await ensure_topics(settings)
        admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
        await admin.start()
        try:
            stamped = {"message.timestamp.type": "LogAppendTime"}
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t, stamped) for t in STAMPED])
        finally:
            await admin.close()
        env = {
            **os.environ,
            "SWARMLOG_BROKER": "kafka",
            "SWARMLOG_BOOTSTRAP": broker.bootstrap,
            "SWARMLOG_REDIS_URL": redis.url,
            "SWARMLOG_REGIONS": "1",
            "SWARMLOG_INBOX_PARTITIONS": str(settings.inbox_partitions),
        }
        processes: list[swarm_bench.Process] = []
        with swarm_bench.stopped_at_end(processes):
            async with (
                Collector(settings, topics.JOURNAL, start="end") as journal_watch,
                Collector(
                    settings, topics.TASK_EVENTS, start="end", keep=lambda e: isinstance(e, TaskStarted)
                ) as tasks,
            ):
                argv = ["coordinator", "--region", "region-0", "--data-dir", str(workdir / "coordinator")]
                swarm_bench.spawn(processes, "coordinator", argv, env, workdir)
                ((name, region, first_slot, capabilities),) = swarm_bench.hosts_of(scenario)
                argv = ["fleet", "--agents", str(args.agents), "--name", name, "--first-slot", str(first_slot)]
                argv += ["--brain", "scripted", "--model", str(swarm_bench.brain_file(workdir, scenario))]
                argv += ["--region", region, "--capabilities", capabilities, "--heartbeat-s", "1"]
                swarm_bench.spawn(processes, "fleet", [*argv, "--data-dir", str(workdir / "agents")], env, workdir)
                expected = {region: {f"{name}-{n}" for n in range(args.agents)}}
                await swarm_bench.enlisted(journal_watch, expected, processes)
                floor_ms = await floor(broker.bootstrap, args.floor)
                idle = await swarm_bench.idle_dispatch(settings, scenario, args.missions, tasks, journal_watch)
        console.print(f"{len(idle)} idle missions on {args.agents} agents; logs in {workdir}")
        submitted = await appended(settings, topics.MISSIONS, MissionSubmitted)
        journaled = await appended(settings, topics.JOURNAL, TaskAssigned)
        sent = await appended(settings, topics.INBOX, TaskAssigned)
        started = await appended(settings, topics.TASK_EVENTS, TaskStarted)
    hops = []
    for event, _ in idle:
        mission = event.mission_id
        decided = journaled[mission][0].occurred_at
        stamps = [event.occurred_at, submitted[mission][1], decided, journaled[mission][1], sent[mission][1]]
        stamps.append(started[mission][0].occurred_at)
        hops.append([later - earlier for earlier, later in itertools.pairwise(stamps)])
    return floor_ms, hops


def table(floor_ms: list[float], hops: list[list[int]]) -> Table:
    """The hops' percentiles, their sum, and the floor."""
    out = Table(title="idle dispatch on Apache Kafka, hop by hop (broker append times), ms")
    for column in ("hop", "p50", "p90", "max"):
        out.add_column(column, justify="left" if column == "hop" else "right")

    def row(name: str, values: list[float]) -> None:
        out.add_row(name, *(f"{percentile(values, q):.1f}" for q in (50, 90, 100)))

    row("floor: raw aiokafka produce → consume", floor_ms)
    for index, name in enumerate(HOPS):
        row(name, [float(mission[index]) for mission in hops])
    row("MissionSubmitted → TaskStarted (all hops)", [float(sum(mission)) for mission in hops])
    return out


def main() -> None:
    """Run and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=8, help="scripted agents on the one fleet host")
    parser.add_argument("--missions", type=int, default=40, help="serial one-task missions")
    parser.add_argument("--median-ms", type=float, default=50, help="the scripted work's median latency")
    parser.add_argument("--floor", type=int, default=100, help="raw round trips for the floor")
    args = parser.parse_args()
    console = Console()
    floor_ms, hops = asyncio.run(run(args, console))
    console.print(table(floor_ms, hops))


if __name__ == "__main__":
    main()
