"""Replay throughput from a history file and from Apache Kafka, next to the raw read + decode rate, on one core.

The history mixes heartbeats (registry), token usage (budgets) and waits (wait-for graph) of 50 agents. Each fold
row times reading the records, decoding the component's records and folding them with `replay.fold.replay` (what
`swarmlog replay` runs); rates are history events per second. The Kafka rows produce the same records (keyed by
agent, stamped with the history's timestamps) to a broker the bench starts, and read them back with
`replay.source.read`; each row checks that its state equals the offline one.
Run: python bench/replay_bench.py [--events N] [--no-kafka]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from rich.console import Console
from rich.table import Table

from swarmlog import topics
from swarmlog.collector import collector_paused
from swarmlog.kafka.admin import ensure_topics
from swarmlog.replay import history, source
from swarmlog.replay.components import COMPONENTS, canonical, jsonable
from swarmlog.replay.fold import Record, replay, selected
from swarmlog.schemas.codec import Codec, default_codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentHeartbeat, AgentRegistered, TokensUsed, WaitEnded, WaitStarted
from swarmlog.services import open_broker
from swarmlog.settings import Settings

T0 = time.time_ns() // 1_000_000 - 3_600_000  # an hour ago: inside every topic's retention on Kafka
AGENTS = 50
REGIONS = ("region-0",)
FOLDS = ("registry", "budgets", "waitgraph")


def events(count: int) -> Iterator[tuple[str, Event]]:
    """`count` (topic, event) pairs: 6 heartbeats, 3 usages and a wait started or ended in every 10."""
    for n in range(count):
        agent, at, kind = f"agent-{n % AGENTS}", T0 + n, n % 10
        envelope: dict[str, Any] = {"event_id": f"e-{n}", "occurred_at": at, "producer": "bench"}
        if n < AGENTS:
            yield (
                topics.REGISTRY,
                AgentRegistered(
                    **envelope,
                    agent_id=agent,
                    capabilities=["code"],
                    model="m",
                    brain="scripted",
                    node="n",
                    region="region-0",
                    slot=n,
                ),
            )
        elif kind < 6:
            yield (
                topics.HEARTBEATS,
                AgentHeartbeat(
                    **envelope,
                    agent_id=agent,
                    registration_id=f"e-{n % AGENTS}",
                    sequence=n,
                    status="BUSY",
                    region="region-0",
                    slot=n % AGENTS,
                ),
            )
        elif kind < 9:
            yield (
                topics.USAGE,
                TokensUsed(**envelope, agent_id=agent, generation_id=f"g-{n}", prompt_tokens=30, completion_tokens=20),
            )
        else:
            wait: dict[str, Any] = {
                "wait_id": f"w-{n // 20}",
                "waiter_agent_id": agent,
                "waits_for_agent_id": f"agent-{(n + 1) % AGENTS}",
            }
            started = n % 20 == 9
            yield (
                topics.WAITS,
                WaitStarted(**envelope, **wait) if started else WaitEnded(**envelope, **wait, outcome="ANSWERED"),
            )


def timed(work: Callable[[], object]) -> float:
    """Seconds `work` takes."""
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def decode_all(records: Iterable[Record], codec: Codec) -> None:
    """Every record decoded and let go, as a fold lets events go, with the collector paused as the replay pauses it:
    the baseline."""
    decode = codec.decode
    with collector_paused():
        for record in records:
            decode(record.value)


def offline_rows(records: list[Record], codec: Codec, folder: Path) -> tuple[list[tuple[str, float]], dict, int]:
    """Write the history file, then time reading it, decoding it and each fold; also returns the states and size."""
    path = folder / "bench.hist"
    count = len(records)
    rows = [("write history file", timed(lambda: history.export(path, records, REGIONS, {"bench": count})))]
    rows.append(("read history file", timed(lambda: history.load(path))))
    rows.append(("read + decode (raw rate)", timed(lambda: decode_all(history.load(path).records, codec))))
    states = {}
    for name in FOLDS:

        def fold(name=name) -> None:
            component = COMPONENTS[name]  # as `swarmlog replay run FILE --component NAME` reads it
            states[name] = replay(component, None, REGIONS, history.load(path, component.topics).records).state

        rows.append((f"read + fold: {name}", timed(fold)))
    return rows, states, path.stat().st_size


async def kafka_rows(records: list[Record], codec: Codec, expected: dict, console: Console) -> list[tuple[str, float]]:
    """Produce the records to a fresh Apache Kafka, then time reading them back, decoding them and each fold."""
    with open_broker(Settings(broker="kafka")) as broker:
        settings = Settings(broker="kafka", bootstrap=broker.bootstrap)
        await ensure_topics(settings)
        with console.status(f"producing {len(records):,} records to Kafka"):
            await produce(settings, records)
        topics = sorted({record.topic for record in records})
        rows = [("consume (replay.source.read)", await timed_async(lambda: source.read(settings, topics)))]

        async def consume_decode() -> None:
            decode_all((await source.read(settings, topics)).records, codec)

        rows.append(("consume + decode (raw rate)", await timed_async(consume_decode)))
        for name in FOLDS:
            component = COMPONENTS[name]

            async def consume_fold(component=component, name=name) -> None:
                state = replay(component, None, REGIONS, (await source.read(settings, component.topics)).records).state
                if canonical(jsonable(state)) != canonical(jsonable(expected[name])):
                    raise AssertionError(f"{name}: the state replayed from Kafka differs from the offline one")

            rows.append((f"consume + fold: {name}", await timed_async(consume_fold)))
        return rows


async def produce(settings: Settings, records: list[Record]) -> None:
    """Every record to its topic, keyed and stamped as in the history, in batches; waits for all acks."""
    producer = AIOKafkaProducer(
        bootstrap_servers=settings.bootstrap, linger_ms=20, max_batch_size=settings.max_message_bytes // 2
    )
    await producer.start()
    try:
        pending = [
            await producer.send(record.topic, record.value, key=record.key, timestamp_ms=record.timestamp)
            for record in records
        ]
        await asyncio.gather(*pending)
    finally:
        await producer.stop()


async def timed_async(work) -> float:
    """Seconds the coroutine `work()` takes."""
    start = time.perf_counter()
    await work()
    return time.perf_counter() - start


def rate_table(title: str, rows: list[tuple[str, float]], count: int, baseline_s: float, baseline: str) -> Table:
    """Stages with seconds, history events/s and the ratio to the baseline row's time."""
    table = Table("stage", "seconds", "history events/s", f"× {baseline}", title=title)
    for stage, seconds in rows:
        table.add_row(stage, f"{seconds:.2f}", f"{count / seconds:,.0f}", f"{baseline_s / seconds:.2f}")
    return table


def main() -> None:
    """Build the history, then time each stage offline and on Kafka against the raw read + decode rate."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--no-kafka", action="store_true", help="only the offline rows")
    args = parser.parse_args()
    logging.getLogger("aiokafka").setLevel(logging.ERROR)  # fresh topics: NotLeader retries until leaders exist
    count, console, codec = args.events, Console(width=120), default_codec()
    with console.status(f"encoding {count:,} events"):
        records = [
            Record(topic, 0, n, T0 + n, f"agent-{n % AGENTS}".encode(), codec.encode(event))
            for n, (topic, event) in enumerate(events(count))
        ]
    with tempfile.TemporaryDirectory() as folder:
        rows, states, size = offline_rows(records, codec, Path(folder))
    raw_s = dict(rows)["read + decode (raw rate)"]
    console.print(
        rate_table(
            f"offline replay, {count:,} events, history file {size / 1e6:.1f} MB, one core",
            rows,
            count,
            raw_s,
            "read + decode",
        )
    )
    console.print(fold_only_table(records, codec))
    if not args.no_kafka:
        rows = asyncio.run(kafka_rows(records, codec, states, console))
        console.print(
            rate_table(
                f"replay from Apache Kafka, {count:,} events (states equal the offline ones)",
                rows,
                count,
                dict(rows)["consume + decode (raw rate)"],
                "consume + decode",
            )
        )


def fold_only_table(records: list[Record], codec: Codec) -> Table:
    """Each component's own events, already decoded, through its fold: the fold's speed alone."""
    table = Table("component", "events", "seconds", "events/s", title="fold only (events already decoded)")
    for name in FOLDS:
        fold = COMPONENTS[name]
        decoded = [codec.decode(record.value) for record in selected(fold, None, REGIONS, records)]

        def fold_only(fold=fold, decoded=decoded) -> None:
            fold.fold(fold.start("", REGIONS), decoded)

        seconds = timed(fold_only)
        table.add_row(name, f"{len(decoded):,}", f"{seconds:.2f}", f"{len(decoded) / seconds:,.0f}")
    return table


if __name__ == "__main__":
    main()
