"""Recovery: the region's journal partition folded to its end, from a snapshot when it provably is a prefix of it.

A snapshot records where it was read (the cluster's id, the partition and its log-start offset) and the offset and
id of the last event it folded. It is used only when all of those still match; otherwise (another cluster, a
recreated topic, a log that ends before the snapshot does) the reason is logged and the whole partition is folded.

Records that do not decode are never guessed at. Unless a repair event (`swarmlog coordinator repair`) passes over
them, recovery refuses with `JournalUnreadable`, which names each record and the command that repairs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import shlex
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.coordinator import PROJECTION, State
from swarmlog.coordinator.journal import FoldedJournal, Origin, Unreadable
from swarmlog.errors import DecodeError, ServiceError, SwarmlogError
from swarmlog.kafka.reading import cluster_id, records_to_end
from swarmlog.schemas.codec import Codec

[JOURNAL] = PROJECTION.topics  # the one topic the coordinator's state is the fold of
WRITE_HEADER = "swarmlog-write"
"""The record header naming the coordinator's write a journal record belongs to (`FoldedJournal.last`)."""
log = logging.getLogger("swarmlog.coordinator")


class JournalUnreadable(SwarmlogError):
    """The region's journal holds records that do not decode and that no repair passes over."""

    def __init__(self, region: str, partition: int, records: Sequence[Unreadable]) -> None:
        self.region, self.partition, self.records = region, partition, tuple(records)
        super().__init__(
            f"the {region} journal holds {_count(records)} that {'does' if len(records) == 1 else 'do'} not decode, "
            f"and its coordinator will not guess what a decision said: {located(partition, records)}. If swarmlog "
            "did not write "
            f"{'it' if len(records) == 1 else 'them'} (garbage, a stray producer), record that "
            f"{'it is' if len(records) == 1 else 'they are'} skipped while this region's coordinator is stopped: "
            f"{repair_command(region, records)}; then start the coordinator again. If a newer swarmlog wrote "
            f"{'it' if len(records) == 1 else 'them'}, run that version instead"
        )


def _count(records: Sequence[Unreadable]) -> str:
    return "1 record" if len(records) == 1 else f"{len(records)} records"


def located(partition: int, records: Sequence[Unreadable]) -> str:
    """The records as `topic[partition]@offset (reason)`, joined by semicolons."""
    return "; ".join(f"{JOURNAL}[{partition}]@{record.offset} ({record.reason})" for record in records)


def repair_command(region: str, records: Sequence[Unreadable]) -> str:
    """The exact `swarmlog coordinator repair` command that passes over these records."""
    skips = " ".join(f"--skip {record.offset}" for record in records)
    return f"swarmlog coordinator repair --region {shlex.quote(region)} {skips} --reason '<why they are garbage>'"


async def recover(
    consumer: AIOKafkaConsumer,
    codec: Codec,
    partition: int,
    empty: State,
    snapshot: FoldedJournal | None,
    timeout_s: float,
    *,
    strict: bool = True,
) -> FoldedJournal:
    """The journal partition folded to its end (from the snapshot when it is still a prefix of it, else from the
    start); with `strict`, a JournalUnreadable when records that do not decode are left unrepaired."""
    tp = TopicPartition(JOURNAL, partition)
    consumer.assign([tp])
    try:
        async with asyncio.timeout(timeout_s):
            origin = await _origin(consumer, tp)
            folded = None
            if snapshot is not None and snapshot.tip is not None:
                doubt = await _doubt(consumer, codec, tp, snapshot, snapshot.tip, empty, origin)
                if doubt is None:
                    state = dataclasses.replace(snapshot.state, config=empty.config)  # today's timeouts
                    folded = await _fold_to_end(
                        consumer, codec, tp, dataclasses.replace(snapshot, state=state, origin=origin)
                    )
                else:
                    log.warning(
                        "%s: not resuming from the coordinator snapshot: %s. Folding the whole journal "
                        "partition instead; its result replaces the snapshot. If this coordinator should run "
                        "against the cluster and topic the snapshot came from, stop it and check "
                        "SWARMLOG_BOOTSTRAP",
                        empty.config.region,
                        doubt,
                    )
            if folded is None:
                await consumer.seek_to_beginning(tp)
                folded = await _fold_to_end(consumer, codec, tp, FoldedJournal(empty, origin=origin))
    except TimeoutError:
        raise ServiceError(
            f"recovery of {tp.topic}[{partition}] took over {timeout_s} s; is the broker healthy? "
            "A snapshot under the data dir shortens it"
        ) from None
    if strict and folded.unresolved:
        raise JournalUnreadable(empty.config.region, partition, folded.unresolved)
    return folded


async def _origin(consumer: AIOKafkaConsumer, tp: TopicPartition) -> Origin:
    """Where the partition is read now: the cluster's id (None where the broker gives none) and its log start."""
    begins = await consumer.beginning_offsets([tp])
    return Origin(await cluster_id(consumer), tp.partition, begins[tp])


async def _doubt(
    consumer: AIOKafkaConsumer,
    codec: Codec,
    tp: TopicPartition,
    snapshot: FoldedJournal,
    tip: tuple[int, str],
    empty: State,
    origin: Origin,
) -> str | None:
    """Why the snapshot (whose last event is `tip`) is not a prefix of this journal partition, or None when it is (the
    consumer is then at the first offset after it)."""
    then = snapshot.origin
    if then is None:
        return "it does not record where it was read"
    config, expected = snapshot.state.config, empty.config
    if (config.region, config.regions, then.partition) != (expected.region, expected.regions, tp.partition):
        return (
            f"it was folded for {snapshot.state.config.region} (partition {then.partition} of regions "
            f"{', '.join(snapshot.state.config.regions)}), not for {empty.config.region} (partition "
            f"{tp.partition} of {', '.join(empty.config.regions)})"
        )
    if then.cluster_id != origin.cluster_id:
        return f"it was read from cluster {then.cluster_id}, and the broker now belongs to cluster {origin.cluster_id}"
    if then.log_start != origin.log_start:
        return (
            f"the partition's log now starts at offset {origin.log_start}, and started at {then.log_start} when "
            "the snapshot was taken (the topic was recreated or records were deleted)"
        )
    at, event_id = tip
    consumer.seek(tp, at)
    record = await anext(aiter(records_to_end(consumer, tp)), None)
    end = _end(consumer, tp)
    if end is not None and snapshot.offset >= end:
        return (
            f"it has folded the journal up to offset {snapshot.offset}, and the log ends before it, at offset "
            f"{end} (a recreated topic, or another cluster)"
        )
    if record is None or record.offset != at:
        return f"the journal holds no record at offset {at}, where the snapshot's last event was"
    try:
        found = codec.decode_record(record.value, tp.topic, tp.partition, record.offset).event_id
    except DecodeError:
        found = "a record that does not decode"
    if found != event_id:
        return (
            f"the journal holds {found} at offset {at}, and the snapshot folded {event_id} there (the topic "
            "was recreated)"
        )
    consumer.seek(tp, snapshot.offset + 1)
    return None


def _end(consumer: AIOKafkaConsumer, tp: TopicPartition) -> int | None:
    """The partition's end as the last fetch saw it: the last stable offset where reading committed, else the high
    watermark (Tansu's LATEST offsets are wrong when a batch holds several records; a fetch's watermark is right)."""
    stable: int | None = consumer.last_stable_offset(tp)
    highwater: int | None = consumer.highwater(tp)
    return stable if stable is not None and stable >= 0 else highwater


async def _fold_to_end(
    consumer: AIOKafkaConsumer, codec: Codec, tp: TopicPartition, folded: FoldedJournal
) -> FoldedJournal:
    """`folded` advanced over every journal record from the consumer's position to the end (undecodable ones noted)."""
    async for record in records_to_end(consumer, tp):
        try:
            event = codec.decode_record(record.value or b"", tp.topic, tp.partition, record.offset)
        except DecodeError as error:
            folded = folded.pass_over(record.offset, error.reason)
            continue
        folded = folded.fold(event, record.offset, write_of(record.headers))
    return folded


def write_of(headers: Sequence[tuple[str, bytes]] | None) -> str | None:
    """The write a journal record's headers name, or None (a record written before writes were named, or a repair)."""
    return next((value.decode() for key, value in headers or () if key == WRITE_HEADER), None)
