"""`swarmlog status`: agents by region and status, queue depth per region, and the coordinators' consumer lag.

Everything is read from the log: the registry and recent heartbeats replayed with the registry's projection (partition
by partition, as the streams worker's table folds them) and judged by its liveness rule, each region's journal
partition folded with the coordinator's own `evolve` (through its recovery), and the
coordinator groups' committed offsets against the input topics' ends. Journal records that do not decode are reported
with the repair command, region by region; they never stop the report (status writes no dead letters: only the
processes that consume a topic for its effects do).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from typing import Annotated, Any

import typer
from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from rich.table import Table

from swarmlog.commands.common import err, one_line_errors, out, print_json
from swarmlog.coordinator import Config, initial
from swarmlog.coordinator.journal import Unreadable
from swarmlog.coordinator.shell.recovery import located, recover, repair_command
from swarmlog.coordinator.shell.service import INPUT_TOPICS
from swarmlog.envelope import now_ms
from swarmlog.errors import ConfigError, ServiceError
from swarmlog.kafka.connection import client_options, start
from swarmlog.kafka.producer import idempotence_supported
from swarmlog.kafka.reading import reader
from swarmlog.replay.components import component
from swarmlog.replay.fold import Record, replay
from swarmlog.replay.source import Span, read
from swarmlog.schemas.codec import codec_for
from swarmlog.settings import Settings, require_reachable
from swarmlog.streams.registry import DEFAULT_TIMEOUT_MS, AgentView, silent
from swarmlog.topics import HEARTBEATS, REGISTRY

HEARTBEAT_WINDOW_MS = 300_000  # heartbeats older than this are not read; the registry still lists the agent
READ_TIMEOUT_S = 60.0

BootstrapOption = Annotated[str | None, typer.Option(help="Kafka bootstrap servers (default: $SWARMLOG_BOOTSTRAP).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON document instead of tables.")]


def connected(bootstrap: str | None) -> Settings:
    """Settings with a reachable broker, or a ConfigError saying how to get one."""
    settings = Settings.from_env(bootstrap=bootstrap)
    if not settings.bootstrap:
        raise ConfigError("no broker: pass --bootstrap or set SWARMLOG_BOOTSTRAP (e.g. localhost:9092)")
    try:
        require_reachable(settings.bootstrap)
    except ConfigError as exc:
        raise ServiceError(str(exc)) from None
    return settings


@dataclasses.dataclass(frozen=True)
class AgentRow:
    """One agent as `swarmlog agents` shows it."""

    agent_id: str
    region: str
    slot: int
    capabilities: list[str]
    model: str
    status: str
    heartbeat_age_s: float | None


def agent_status(view: AgentView, now: int, timeout_ms: int = DEFAULT_TIMEOUT_MS) -> str:
    """DEAD or DEREGISTERED from the registry, SILENT when the registry's liveness rule finds it silent, else its own."""
    if not view.alive:
        return view.liveness.upper()
    return "SILENT" if silent(view, now, timeout_ms) else view.status


async def read_agents(settings: Settings, window_ms: int = HEARTBEAT_WINDOW_MS) -> list[AgentRow]:
    """Every agent of the registry with its latest heartbeat (within `window_ms`), by the registry's projection."""
    now = now_ms()
    records = await read_records(settings, REGISTRY) + await read_records(
        settings, HEARTBEATS, since_ms=now - window_ms
    )
    # The registry's replay: each partition folded on its own, as the streams worker's table folds them.
    folded = replay(
        component("registry"), None, settings.region_names, records, codec_for(settings.schema_registry_url)
    )
    views = folded.state.agents.values()
    return [
        AgentRow(
            v.agent_id,
            v.region,
            v.slot,
            sorted(v.capabilities),
            v.model,
            agent_status(v, now),
            round((now - v.last_heartbeat_ms) / 1000, 1),
        )
        for v in sorted(views, key=lambda v: (v.region, v.agent_id))
    ]


async def read_records(settings: Settings, topic: str, since_ms: int | None = None) -> list[Record]:
    """A topic's records (from `since_ms` when given) up to its current end."""
    reading = await read(settings, [topic], Span(from_ms=since_ms), timeout_s=READ_TIMEOUT_S)
    return list(reading.records)


@dataclasses.dataclass(frozen=True)
class RegionRow:
    """One region as the fold of its journal partition shows it, with its coordinator group's lag and the journal
    records that do not decode: `undecodable` (no repair passes over them: the coordinator will not start) and
    `skipped` (a repair does)."""

    region: str
    journal_events: int
    queue_depth: int
    active_missions: int
    enlisted_agents: int
    lag: int | None
    undecodable: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    skipped: int = 0


async def read_region(settings: Settings, region: str) -> RegionRow:
    """The region's journal partition folded with the coordinator's `evolve` (records that do not decode reported,
    not fatal), and its consumer lag."""
    partition = settings.region_names.index(region)
    consumer = reader(settings, "swarmlog-status", idempotence_supported(settings))
    await start(consumer, settings)
    try:
        folded = await recover(
            consumer,
            codec_for(settings.schema_registry_url),
            partition,
            initial(Config(region, settings.region_names)),
            None,
            READ_TIMEOUT_S,
            strict=False,
        )
    finally:
        await consumer.stop()
    state = folded.state
    return RegionRow(
        region,
        folded.offset + 1,
        len(state.queue),
        sum(1 for mission in state.missions.values() if mission.active),
        sum(1 for agent in state.agents.values() if agent.alive),
        await group_lag(settings, region),
        [dataclasses.asdict(record) for record in folded.unresolved],
        len(folded.skipped),
    )


async def group_lag(settings: Settings, region: str) -> int | None:
    """Records on the coordinator's input topics not yet committed by its group; None when it never committed."""
    group = f"swarmlog-coordinator-{region}"
    admin = AIOKafkaAdminClient(**client_options(settings), client_id="swarmlog-status")
    await start(admin, settings)
    try:
        committed = await admin.list_consumer_group_offsets(group)
    except KafkaError:
        return None
    finally:
        await admin.close()
    offsets: dict[TopicPartition, int] = {
        tp: meta.offset for tp, meta in committed.items() if tp.topic in INPUT_TOPICS and meta.offset >= 0
    }
    if not offsets:
        return None
    consumer = AIOKafkaConsumer(**client_options(settings), client_id="swarmlog-status")
    await start(consumer, settings)
    try:
        ends: dict[TopicPartition, int] = await consumer.end_offsets(list(offsets))
    finally:
        await consumer.stop()
    return sum(max(0, ends[tp] - offset) for tp, offset in offsets.items())


async def gather_status(settings: Settings) -> tuple[list[AgentRow], list[RegionRow]]:
    """The agents and every region, read concurrently."""
    agents, regions = await asyncio.gather(
        read_agents(settings), asyncio.gather(*(read_region(settings, region) for region in settings.region_names))
    )
    return agents, regions


def status_document(agents: list[AgentRow], regions: list[RegionRow]) -> dict[str, Any]:
    """The JSON shape of `swarmlog status`."""
    by_region: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for agent in agents:
        by_region[agent.region][agent.status] += 1
    return {
        "agents": {region: dict(counts) for region, counts in sorted(by_region.items())},
        "regions": {row.region: {k: v for k, v in dataclasses.asdict(row).items() if k != "region"} for row in regions},
    }


@one_line_errors
def status(bootstrap: BootstrapOption = None, as_json: JsonOption = False) -> None:
    """Agents by region and status, queue depth and active missions per region, coordinator consumer lag."""
    settings = connected(bootstrap)
    agents, regions = asyncio.run(gather_status(settings))
    document = status_document(agents, regions)
    if as_json:
        print_json(document)
        return
    statuses = sorted({name for counts in document["agents"].values() for name in counts})
    table = Table("region", *statuses, title=f"agents on {settings.bootstrap}")
    for region, counts in document["agents"].items():
        table.add_row(region, *(str(counts.get(name, 0)) for name in statuses))
    out.print(table if document["agents"] else "no agents have registered yet")
    table = Table(
        "region",
        "journal events",
        "queue depth",
        "active missions",
        "enlisted agents",
        "consumer lag",
        title="coordinators",
    )
    for row in regions:
        table.add_row(
            row.region,
            str(row.journal_events),
            str(row.queue_depth),
            str(row.active_missions),
            str(row.enlisted_agents),
            "-" if row.lag is None else str(row.lag),
        )
    out.print(table)
    for row in regions:
        if row.undecodable:
            records = [Unreadable(**record) for record in row.undecodable]
            err.print(
                f"[red]{row.region}:[/red] {len(records)} journal record(s) do not decode and no repair skips "
                f"them; its coordinator will not start: {located(settings.region_names.index(row.region), records)}. "
                f"If swarmlog did not write them: {repair_command(row.region, records)}",
                highlight=False,
                soft_wrap=True,
            )
        if row.skipped:
            out.print(
                f"{row.region}: {row.skipped} undecodable journal record(s) passed over by a recorded repair "
                "(`swarmlog replay state coordinator --key REGION` lists them)",
                highlight=False,
            )
