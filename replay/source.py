"""Reading the log: topics from the beginning, an offset or a time, up to an end fixed when the read starts.

On Apache Kafka a time becomes offsets through `offsets_for_times` (record timestamps). Tansu answers that with
arrival times and its LATEST offsets are wrong when a batch holds several records, so there every partition is
read from its beginning to the high watermark of a first fetch, and each partition is cut where that seek would
cut it (by record timestamps), so both brokers give the same records.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.errors import ServiceError
from swarmlog.kafka.connection import client_options, start
from swarmlog.kafka.producer import idempotence_supported
from swarmlog.replay.fold import Record
from swarmlog.settings import Settings

POLL_MS = 200
TIMEOUT_S = 120.0
TANSU_NOTE = "Tansu's offsets_for_times uses arrival time: scanned from the beginning, filtered by record timestamp"


@dataclasses.dataclass(frozen=True, slots=True)
class Span:
    """Which records to read: from an offset or time (None: the beginning) up to an offset or time (inclusive)."""

    from_offset: int | None = None
    from_ms: int | None = None
    to_offset: int | None = None
    to_ms: int | None = None

    def keeps(self, record: Record) -> bool:
        """Whether a record is inside the span (the check that makes a scan exact)."""
        return (
            (self.from_offset is None or record.offset >= self.from_offset)
            and (self.to_offset is None or record.offset <= self.to_offset)
            and (self.from_ms is None or record.timestamp >= self.from_ms)
            and (self.to_ms is None or record.timestamp <= self.to_ms)
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """The records read, and notes on how (e.g. a scan instead of a seek by time)."""

    records: tuple[Record, ...]
    notes: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()
    """The topics asked for that the broker does not have."""


async def read(
    settings: Settings,
    topics: Iterable[str],
    span: Span = Span(),
    partitions: Mapping[str, Iterable[int]] | None = None,
    timeout_s: float = TIMEOUT_S,
) -> Reading:
    """Every record of `topics` (optionally only some partitions) inside `span`, up to the ends at start."""
    kafka = idempotence_supported(settings)
    consumer = AIOKafkaConsumer(
        **client_options(settings),
        client_id="swarmlog-replay",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if kafka else "read_uncommitted",
    )
    await start(consumer, settings)
    try:
        async with asyncio.timeout(timeout_s):
            tps, absent = await _partitions(consumer, topics, partitions or {})
            if not tps:
                return Reading((), absent=absent)
            consumer.assign(tps)
            ranges = await (_seek(consumer, tps, span) if kafka else _scan(consumer, tps))
            records = await _fetch(consumer, ranges)
    except TimeoutError:
        raise ServiceError(
            f"reading {', '.join(sorted(set(topics)))} took over {timeout_s} s; is the broker healthy?"
        ) from None
    finally:
        await consumer.stop()
    timed = span.from_ms is not None or span.to_ms is not None
    notes = (TANSU_NOTE,) if timed and not kafka else ()
    if kafka and not timed:  # offsets alone: the seek was exact
        return Reading(tuple(records), notes, absent)
    if timed and not kafka:
        records = cut_as_kafka_seeks(records, span)
    return Reading(tuple(record for record in records if span.keeps(record)), notes, absent)


def cut_as_kafka_seeks(records: Iterable[Record], span: Span) -> list[Record]:
    """Each partition's records (in offset order) from the first whose timestamp is at or after `from_ms` to before
    the first after `to_ms`: what seeking with Kafka's offsets_for_times reads, so that a state at a time is a prefix
    of every partition on either broker, even where timestamps do not rise with offsets."""
    by_partition: dict[tuple[str, int], list[Record]] = {}
    for record in records:  # fetches interleave partitions; each partition's records come in offset order
        by_partition.setdefault((record.topic, record.partition), []).append(record)
    kept: list[Record] = []
    for partition in by_partition.values():
        start = next(
            (i for i, r in enumerate(partition) if span.from_ms is None or r.timestamp >= span.from_ms), len(partition)
        )
        stop = next(
            (i for i, r in enumerate(partition) if span.to_ms is not None and r.timestamp > span.to_ms), len(partition)
        )
        kept += partition[start:stop]
    return kept


async def _partitions(
    consumer: AIOKafkaConsumer, topics: Iterable[str], chosen: Mapping[str, Iterable[int]]
) -> tuple[list[TopicPartition], tuple[str, ...]]:
    """The partitions to read (the chosen ones of a topic, else all it has), and the topics that do not exist."""
    cluster = await consumer._client.fetch_all_metadata()  # the public topics() keeps the names, not the partitions
    names = list(dict.fromkeys(topics))
    absent = tuple(topic for topic in names if cluster.partitions_for_topic(topic) is None)
    return [
        TopicPartition(topic, index)
        for topic in names
        if topic not in absent
        for index in sorted(chosen.get(topic) or cluster.partitions_for_topic(topic))
    ], absent


async def _seek(
    consumer: AIOKafkaConsumer, tps: list[TopicPartition], span: Span
) -> dict[TopicPartition, tuple[int, int]]:
    """Kafka: [first, end) per partition from the log's offsets and, for times, `offsets_for_times`."""
    begins, ends = await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
    firsts, stops = dict(begins), dict(ends)
    if span.from_ms is not None:
        found = await consumer.offsets_for_times({tp: span.from_ms for tp in tps})
        firsts = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
    if span.to_ms is not None:
        found = await consumer.offsets_for_times({tp: span.to_ms + 1 for tp in tps})
        stops = {tp: ends[tp] if found[tp] is None else found[tp].offset for tp in tps}
    if span.from_offset is not None:
        firsts = {tp: max(firsts[tp], span.from_offset) for tp in tps}
    if span.to_offset is not None:
        stops = {tp: min(stops[tp], span.to_offset + 1) for tp in tps}
    return {tp: (firsts[tp], stops[tp]) for tp in tps}


async def _scan(consumer: AIOKafkaConsumer, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
    """Tansu: [beginning, high watermark of a first fetch) per partition; the span is applied to the records."""
    begins = await consumer.beginning_offsets(tps)
    for tp in tps:
        consumer.seek(tp, begins[tp])
    while any(consumer.highwater(tp) is None for tp in tps):
        await consumer.getmany(*tps, timeout_ms=POLL_MS)
    return {tp: (begins[tp], consumer.highwater(tp)) for tp in tps}


async def _fetch(consumer: AIOKafkaConsumer, ranges: dict[TopicPartition, tuple[int, int]]) -> list[Record]:
    """The records of each partition in [first, stop)."""
    pending = {tp: stop for tp, (first, stop) in ranges.items() if first < stop}
    for tp in ranges:
        consumer.seek(tp, ranges[tp][0])
    records: list[Record] = []
    while pending:
        batches = await consumer.getmany(*pending, timeout_ms=POLL_MS)
        for tp, batch in batches.items():
            topic, partition, stop = tp.topic, tp.partition, pending.get(tp, -1)
            records += [
                Record(topic, partition, record.offset, record.timestamp, record.key, record.value)
                for record in batch
                if record.offset < stop
            ]
        pending = {tp: stop for tp, stop in pending.items() if await consumer.position(tp) < stop}
    return records
