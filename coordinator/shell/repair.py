"""`swarmlog coordinator repair`: record, in the journal itself, which undecodable journal records to pass over.

The repair is a JournalRecordsSkipped event on the region's journal partition, so recovery, replay and status all read
the same decision, and the journal keeps who made it and why. It refuses every offset that is not an undecodable
record of the partition: a record that decodes is a decision that may have been acted on, and is never skipped.

On Apache Kafka it writes in one transaction under the coordinator's transactional id (swarmlog-coordinator-<region>).
Coordinators write journal first without transactions, so nothing fences a coordinator still running: stop it first,
on both brokers (a skip changes no state, so a coordinator that keeps running is not harmed, but it is not told).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.coordinator import PROJECTION, Config
from swarmlog.coordinator.announcements import MISSED_INTERVALS
from swarmlog.coordinator.journal import FoldedJournal, Unreadable
from swarmlog.coordinator.shell.announce import read_announcements
from swarmlog.coordinator.shell.recovery import JOURNAL, recover, repair_command
from swarmlog.envelope import now_ms, stamp
from swarmlog.errors import ConfigError, DecodeError, SwarmlogError
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import Codec, codec_for
from swarmlog.schemas.records import JournalRecordsSkipped
from swarmlog.settings import Settings

READ_TIMEOUT_S = 120.0


class RepairRefused(SwarmlogError):
    """The repair names an offset it may not skip (one that decodes, or that holds no record of the partition), or a
    coordinator still serves the region."""


@dataclasses.dataclass(frozen=True, slots=True)
class Repaired:
    """What a repair did: the offset of the JournalRecordsSkipped it wrote (None: nothing needed), the offsets it
    skipped, those an earlier repair already skipped, and undecodable records still left unrepaired."""

    region: str
    partition: int
    written_at: int | None
    skipped: tuple[Unreadable, ...]
    already: tuple[int, ...]
    left: tuple[Unreadable, ...]


async def repair(
    settings: Settings, region: str, offsets: Sequence[int], reason: str, operator: str, *, force: bool = False
) -> Repaired:
    """Record a JournalRecordsSkipped for `offsets` of the region's journal partition, after checking each one is an
    undecodable record; RepairRefused naming every offset that is not, or the coordinator that still serves the
    region (unless `force`)."""
    if region not in settings.region_names:
        raise ConfigError(
            f"unknown region {region!r}; SWARMLOG_REGIONS={settings.regions} gives {', '.join(settings.region_names)}"
        )
    serving = (await read_announcements(settings)).get(region)
    if not force and serving is not None and serving.serves_at(now_ms()):
        raise RepairRefused(
            f"a coordinator still serves {region} ({serving.coordinator_id}, announced "
            f"{(now_ms() - serving.at_ms) / 1000:.1f} s ago): stop it first, then repair (nothing was written). A "
            f"coordinator killed just now stops counting within {MISSED_INTERVALS * serving.interval_ms / 1000:.0f} s; "
            "--force repairs anyway"
        )
    partition, codec = settings.region_names.index(region), codec_for(settings.schema_registry_url)
    transactional = idempotence_supported(settings)
    name = f"swarmlog-coordinator-{region}"
    consumer = reader(settings, f"{name}-repair", transactional)
    await consumer.start()
    try:
        folded = await recover(
            consumer,
            codec,
            partition,
            PROJECTION.initial(Config(region, settings.region_names)),
            None,
            READ_TIMEOUT_S,
            strict=False,
        )
        refused = [
            why
            for offset in sorted(set(offsets))
            if (why := await _refusal(consumer, codec, partition, folded, offset)) is not None
        ]
    finally:
        await consumer.stop()
    if refused:
        raise RepairRefused(
            f"nothing was written to the {region} journal: {'; '.join(refused)}. Only records that "
            "do not decode may be skipped; `swarmlog status` and the coordinator's refusal name them"
        )
    unreadable = {record.offset: record for record in folded.unreadable}
    chosen = sorted(set(offsets))
    skipped = tuple(unreadable[offset] for offset in chosen if offset not in folded.skipped)
    already = tuple(offset for offset in chosen if offset in folded.skipped)
    left = tuple(record for record in folded.unresolved if record.offset not in chosen)
    if not skipped:
        return Repaired(region, partition, None, (), already, left)
    event = stamp(
        JournalRecordsSkipped,
        producer=f"operator:{operator}",
        region=region,
        partition=partition,
        offsets=[record.offset for record in skipped],
        errors=[record.reason for record in skipped],
        reason=reason,
        operator=operator,
    )
    async with EventProducer(
        settings, client_id=f"{name}-repair", transactional_id=name if transactional else None
    ) as producer:
        payload, key = producer.encode_for(JOURNAL, event), region.encode()
        headers = producer.headers_for(JOURNAL, key, payload)
        if transactional:  # the coordinator's id: starting this producer fenced any coordinator of the region
            async with producer.raw.transaction():
                sent = await producer.raw.send(JOURNAL, payload, key=key, partition=partition, headers=headers)
            written = (await sent).offset
        else:
            written = (
                await producer.raw.send_and_wait(JOURNAL, payload, key=key, partition=partition, headers=headers)
            ).offset
    return Repaired(region, partition, written, skipped, already, left)


async def _refusal(
    consumer: AIOKafkaConsumer, codec: Codec, partition: int, folded: FoldedJournal, offset: int
) -> str | None:
    """Why `offset` may not be skipped, or None when it holds a record that does not decode."""
    if any(record.offset == offset for record in folded.unreadable):
        return None
    where = f"{JOURNAL}[{partition}]@{offset}"
    if offset < 0 or offset > folded.offset:
        return f"{where} is past the partition's last record (offset {folded.offset})"
    tp = TopicPartition(JOURNAL, partition)
    consumer.seek(tp, offset)
    record = await anext(aiter(records_to_end(consumer, tp)), None)
    if record is None or record.offset != offset:
        return (
            f"{where} holds no record that is read (the log starts later, or it is a transaction marker or an "
            "aborted write)"
        )
    try:
        event = codec.decode_record(record.value or b"", JOURNAL, partition, offset)
    except DecodeError:  # written after the fold read the partition: decide on the next repair, with its reading
        return f"{where} was written after the repair read the partition; run the repair again"
    return f"{where} decodes as {event.name} {event.event_id}, a decision that may have been acted on"


def describe(repaired: Repaired) -> list[str]:
    """What a repair did, one line each, ending with what to do next."""
    lines = []
    where = f"{JOURNAL}[{repaired.partition}]"
    if repaired.written_at is not None:
        lines.append(
            f"recorded JournalRecordsSkipped at {where}@{repaired.written_at}: offsets "
            f"{', '.join(str(record.offset) for record in repaired.skipped)} are passed over by recovery, "
            "replay and status"
        )
    if repaired.already:
        lines.append(f"already skipped by an earlier repair: offsets {', '.join(map(str, repaired.already))}")
    if repaired.left:
        lines.append(
            f"still undecodable and not skipped: {', '.join(str(r.offset) for r in repaired.left)}; the "
            f"coordinator will refuse to start until they are: {repair_command(repaired.region, repaired.left)}"
        )
    else:
        lines.append(f"start the coordinator again: swarmlog coordinator --region {repaired.region}")
    return lines
