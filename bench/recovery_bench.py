"""Coordinator recovery as its journal grows: 10k, 100k and 1M journal events, from a snapshot and from nothing.

Starts Apache Kafka itself and writes one region's journal partition per size: a steady run of small missions (two
tasks started and completed, a vote of four agents, one mission a second), decided by the coordinator's own pure core
on a simulated clock (so ended missions are retired after the retention, as live), written as the live coordinator
writes them. Then, per size:
- snapshot + tail: the restart after a crash. The snapshot is taken SNAPSHOT_EVERY_EVENTS / 2 events before the
  journal's end (the live coordinator takes one every SNAPSHOT_EVERY_EVENTS), and `recover` folds the tail;
- whole journal: `recover` with no snapshot (a lost data dir, another cluster), timed once, on the journal up to
  the snapshot (it makes the snapshot): it grows with the journal;
- the live state's size: missions held, retired ids, snapshot bytes.
Target ("flat"): snapshot + tail at the largest size at most 2x the time at the smallest.
Run: .venv/bin/python bench/recovery_bench.py [--sizes 10000,100000,1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import pickle
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import AIOKafkaProducer
from rich.console import Console
from rich.table import Table

from swarmlog.coordinator import Config, Decision, Receive, State, Tick, decide, evolve, initial
from swarmlog.coordinator.shell import folded as snapshots
from swarmlog.coordinator.shell.recovery import JOURNAL, recover
from swarmlog.coordinator.shell.service import SNAPSHOT_EVERY_EVENTS
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.reading import reader
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentRegistered,
    MissionSubmitted,
    TaskAssigned,
    TaskCompleted,
    TaskStarted,
    VoteCast,
    VoteRequested,
)
from swarmlog.services import open_broker
from swarmlog.settings import Settings

AGENTS = 4
MISSION_EVERY_MS = 1_000
T0 = 1_750_000_000_000


@dataclasses.dataclass
class Workload:
    """The pure coordinator driven by simulated agents: `events()` yields the journal it writes, in order."""

    config: Config
    state: State = dataclasses.field(init=False)
    now_ms: int = T0
    inputs: int = 0

    def __post_init__(self) -> None:
        self.state = initial(self.config)

    def events(self) -> Iterator[list[Event]]:
        """The journal in batches, `state` being their fold after each: agents enlisting, then one mission a second
        (with the tick after it), forever."""
        yield [
            event
            for index in range(AGENTS)
            for event in self._send(
                AgentRegistered,
                agent_id=f"a{index}",
                capabilities=["work", "decision_making"],
                model="scripted",
                brain="scripted",
                node="bench",
                gpu=None,
                region=self.config.region,
                slot=index,
            )
        ]
        for number in range(1 << 62):
            batch = self._mission(f"m{number}")
            self.now_ms += MISSION_EVERY_MS
            yield batch + self._apply(Tick(self.now_ms, f"tick-{number}"))

    def _mission(self, mission_id: str) -> list[Event]:
        """Submit a two-task mission and answer every task and ballot it sends until it completes."""
        pending = self._send(
            MissionSubmitted,
            mission_id=mission_id,
            title=mission_id,
            region=self.config.region,
            tasks=[{"task_id": t, "prompt": "p", "required_capabilities": ["work"]} for t in ("a", "b")],
            submitted_by="bench",
        )
        journal: list[Event] = []
        while pending:
            event = pending.pop(0)
            journal.append(event)
            pending += self._answer(event)
        return journal

    def _answer(self, event: Event) -> list[Event]:
        """What the simulated agent does on a journal event addressed to it."""
        if isinstance(event, TaskAssigned):
            about = {
                "mission_id": event.mission_id,
                "task_id": event.task_id,
                "replica": event.replica,
                "attempt": event.attempt,
                "agent_id": event.agent_id,
            }
            return [
                *self._send(TaskStarted, **about, ground_truth_version=None),
                *self._send(
                    TaskCompleted,
                    **about,
                    output=f"{event.task_id} done",
                    steps=1,
                    prompt_tokens=3,
                    completion_tokens=2,
                    latency_ms=5,
                ),
            ]
        if isinstance(event, VoteRequested):
            return list(
                self._send(
                    VoteCast,
                    mission_id=event.mission_id,
                    ballot_id=event.ballot_id,
                    voter_agent_id=event.voter_agent_id,
                    candidate_id=event.candidates[0].candidate_id,
                    confidence=1.0,
                    reason=None,
                )
            )
        return []

    def _send(self, kind: type[Event], **fields: Any) -> list[Event]:
        """Decide on an input event written by someone else at the simulated now."""
        self.inputs += 1
        envelope = {
            "event_id": f"in-{self.inputs}",
            "occurred_at": self.now_ms,
            "correlation_id": fields.get("mission_id"),
            "causation_id": None,
            "producer": "bench",
        }
        return self._apply(Receive(msgspec.convert(envelope | fields, kind), self.now_ms))

    def _apply(self, command: Receive | Tick) -> list[Event]:
        """Decide, fold what was decided, and return it."""
        decision = decide(command, self.state)
        assert isinstance(decision, Decision), decision
        for event in decision.events:
            self.state = evolve(self.state, event)
        return list(decision.events)


@dataclasses.dataclass(frozen=True)
class Result:
    """One journal size: recovery times (s, each run) and what the recovered state holds."""

    events: int
    from_snapshot_s: list[float]
    whole_s: float
    missions: int
    retired: int
    snapshot_bytes: int


async def write(bootstrap: str, partition: int, batches: Iterator[list[Event]], count: int) -> int:
    """Whole batches to the journal partition, in order, until at least `count` events; how many were written."""
    codec = codec_for(None)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=20, max_batch_size=1 << 19)
    await producer.start()
    written, pending = 0, []
    try:
        while written < count:
            for event in next(batches):
                pending.append(await producer.send(JOURNAL, codec.encode(event), partition=partition))
                written += 1
            if len(pending) >= 20_000:
                await asyncio.gather(*pending)
                pending.clear()
        await asyncio.gather(*pending)
    finally:
        await producer.stop()
    return written


async def recovered(
    settings: Settings, partition: int, empty: State, snapshot: snapshots.FoldedJournal | None
) -> tuple[snapshots.FoldedJournal, float]:
    """The journal partition recovered (from `snapshot` when given), and the seconds it took."""
    consumer = reader(settings, "bench-recovery", transactional=False)
    await consumer.start()
    try:
        started = time.perf_counter()
        folded = await recover(consumer, codec_for(None), partition, empty, snapshot, timeout_s=3600)
        return folded, time.perf_counter() - started
    finally:
        await consumer.stop()


async def measure(
    settings: Settings, partition: int, size: int, repeat: int, data_dir: Path, console: Console
) -> Result:
    """Write a journal of `size` events, snapshot it near its end, and time both recoveries."""
    config = Config(settings.region_names[partition], settings.region_names)
    workload = Workload(config)
    events = workload.events()
    head = size - SNAPSHOT_EVERY_EVENTS // 2
    started = time.perf_counter()
    head = await write(settings.bootstrap or "", partition, events, head)
    console.print(f"  {head:,} events decided and written in {time.perf_counter() - started:.0f} s")
    snapshot, whole_s = await recovered(settings, partition, initial(config), None)
    snapshots.save(data_dir / config.region, snapshot)
    size = head + await write(settings.bootstrap or "", partition, events, SNAPSHOT_EVERY_EVENTS // 2)
    tail = [
        (await recovered(settings, partition, initial(config), snapshots.load(data_dir / config.region)))
        for _ in range(repeat)
    ]
    folded = tail[-1][0]
    assert folded.offset == size - 1 and folded.state == workload.state, "recovery must give the state decided"
    console.print(
        f"  {size:,}: whole journal {whole_s:.1f} s, snapshot + tail {statistics.median(s for _, s in tail):.3f} s"
    )
    return Result(
        size,
        [s for _, s in tail],
        whole_s,
        len(folded.state.missions),
        len(folded.state.retired),
        len(pickle.dumps(folded)),
    )


def table(results: list[Result]) -> Table:
    """Recovery per journal size, each against the smallest size measured in the same run."""
    base = results[0]
    out = Table(title="coordinator recovery on Apache Kafka (median of the runs; ratio against the smallest journal)")
    for column in (
        "journal events",
        "snapshot + tail s",
        "ratio",
        "whole journal s*",
        "ratio",
        "missions held",
        "retired ids",
        "snapshot bytes",
    ):
        out.add_column(column, justify="right")
    for result in results:
        tail = statistics.median(result.from_snapshot_s)
        out.add_row(
            f"{result.events:,}",
            f"{tail:.3f}",
            f"{tail / statistics.median(base.from_snapshot_s):.2f}x",
            f"{result.whole_s:.2f}",
            f"{result.whole_s / base.whole_s:.1f}x",
            f"{result.missions:,}",
            f"{result.retired:,}",
            f"{result.snapshot_bytes:,}",
        )
    return out


async def main(args: argparse.Namespace) -> None:
    console = Console(width=130)
    sizes = [int(size) for size in args.sizes.split(",")]
    with open_broker(Settings(broker="kafka")) as broker, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(broker="kafka", bootstrap=broker.bootstrap, regions=len(sizes))
        await ensure_topics(settings)
        console.print(f"Apache Kafka at {broker.bootstrap}; journals of {', '.join(f'{s:,}' for s in sizes)} events")
        results = [
            await measure(settings, partition, size, args.repeat, Path(tmp), console)
            for partition, size in enumerate(sizes)
        ]
    console.print(table(results))
    console.print(f"* to the snapshot, {SNAPSHOT_EVERY_EVENTS // 2} events before the end; one run")
    flat = statistics.median(results[-1].from_snapshot_s) / statistics.median(results[0].from_snapshot_s)
    smallest, largest = results[0].events, results[-1].events
    console.print(
        f"flat (snapshot + tail at {largest:,} events within 2x of {smallest:,}): "
        f"{'yes' if flat <= 2 else 'NO'} ({flat:.2f}x)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="journal sizes, comma-separated, ascending")
    parser.add_argument("--repeat", type=int, default=3, help="recoveries from the snapshot timed per size")
    asyncio.run(main(parser.parse_args()))
