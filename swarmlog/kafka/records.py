"""Consumed records to events: decode with coordinates, or route the raw bytes to the dead-letter topic.

Each record a reader cannot use is dead-lettered once overall: by the one component that owns its topic's dead letters
(DEAD_LETTERED_BY), with an id derived from the record's coordinates alone (dead_letter_id), so a record read again
after a crash or a rebalance, or by a second instance of its owner, writes the same dead letter, deduped by event id.
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from typing import Any

from swarmlog import topics
from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.signing import Trust
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import DeadLetterRecorded
from swarmlog.settings import Settings
from swarmlog.streams.alerts import derived_id
from swarmlog.topics import catalog

log = logging.getLogger("swarmlog.deadletter")

DEAD_LETTER_MARGIN = 16_384
"""Bytes of a dead letter's limit kept for what is not the kept bytes: its other fields, the record and batch headers."""
KEPT_KEY_BYTES = 1024
"""A key longer than this is cut first when a dead letter would not fit."""
KEPT_REASON_CHARS = 2000
DEAD_LETTERED_BY = {
    topics.MISSIONS: "coordinator",
    topics.TASK_EVENTS: "coordinator",
    topics.VOTES: "coordinator",
    topics.ALERTS: "coordinator",
    topics.SLOTS: "coordinator",
    topics.REGISTRY: "streams",
    topics.HEARTBEATS: "streams",
    topics.CONTROL: "streams",
    topics.USAGE: "streams",
    topics.WAITS: "streams",
    topics.EXPERIENCES: "streams",
    topics.INBOX: "agent",
}
"""Who writes the dead letters of a topic's unusable records (the one component reading it for its effects that is
sure to read every record of it): the streams worker reads the registry and control for deaths and budgets as one
group, where every coordinator and every agent reads them whole; every coordinator reads the coordinators' topics
whole and writes the same dead letter (one id: see dead_letter_id); an inbox record is its addressee's. Any other reader
skips them. Nobody dead-letters swarm.deadletter (a loop), the journal (the coordinator stops and asks for a repair)
or what only clients read (swarm.coordinators, swarm.groundtruth)."""

VERIFIED_TOPICS = frozenset(DEAD_LETTERED_BY) - {topics.MISSIONS}
"""The topics whose records readers verify when signing is on: every topic read for its effects but swarm.missions,
which any Kafka client writes (its writers are bound by ACLs alone: docs/operations.md, "Signing events")."""

TOPIC_EVENTS = {spec.name: frozenset(spec.events) for spec in catalog(Settings())}
"""The events each catalog topic carries (the same whatever the settings), by topic name."""


class NotAnInput(DecodeError):
    """A record that decodes, but to an event its topic does not carry: it is no input of whoever reads the topic."""


def dead_letter_id(topic: str, partition: int, offset: int) -> str:
    """The event id of a record's dead letter: derived from its coordinates alone, whoever writes it (the streams
    worker's ids are these too), so writing it again is a duplicate."""
    return derived_id(DeadLetterRecorded.name, topic, partition, offset)


def input_event(codec: Codec, record: Any, carries: Collection[str] | None, trust: Trust | None = None) -> Event:
    """The record's event when it decodes to a kind in `carries` (its topic's events; None: any) and, with a `trust`
    on a verified topic, is signed by a principal that may write it; else DecodeError, NotAnInput or
    SignatureRejected at the record's coordinates."""
    event = codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
    if trust is not None and record.topic in VERIFIED_TOPICS:
        trust.check(record, event)
    if carries is not None and event.name not in carries:
        kinds = ", ".join(sorted(carries)) or "nothing"
        raise NotAnInput(
            f"{event.name} {event.event_id} does not belong on {record.topic}, which carries {kinds}",
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
        )
    return event


def fitted(payload: bytes, key: bytes | None, max_message_bytes: int) -> tuple[bytes, bytes | None, str]:
    """The payload and key a dead letter can keep within `max_message_bytes` (the dead-letter topic's limit), and a
    note saying what was cut ("" when nothing was): a record as large as its own topic allows would not fit whole
    with the dead letter's other fields, and one over the limit would make the dead letter itself fail."""
    room = max(0, max_message_bytes - DEAD_LETTER_MARGIN)
    if len(payload) + len(key or b"") <= room:
        return payload, key, ""
    kept_key = None if key is None else key[: min(len(key), KEPT_KEY_BYTES, room)]
    kept = payload[: max(0, room - len(kept_key or b""))]
    cut = [f"payload cut to its first {len(kept)} of {len(payload)} bytes"]
    if key is not None and len(kept_key or b"") < len(key):
        cut.append(f"key cut to its first {len(kept_key or b'')} of {len(key)} bytes")
    return kept, kept_key, "; ".join(cut) + " to fit the dead-letter topic"


def dead_letter(
    record: Any, error: Exception, consumer: str, *, max_message_bytes: int | None = None, event_id: str | None = None
) -> DeadLetterRecorded:
    """The DeadLetterRecorded event that keeps an unusable record's bytes, origin and reason; with
    `max_message_bytes`, bytes that would not fit in a message of that size are cut (the reason says so); a fresh id
    unless `event_id` is given (see dead_letter_id)."""
    payload, key, note = record.value or b"", record.key, ""
    if max_message_bytes is not None:
        payload, key, note = fitted(payload, key, max_message_bytes)
    return stamp(
        DeadLetterRecorded,
        producer=consumer,
        event_id=event_id,
        origin_topic=record.topic,
        origin_partition=record.partition,
        origin_offset=record.offset,
        origin_key=key,
        payload=payload,
        error_type=type(error).__name__,
        reason=with_note(str(error), note),
        consumer=consumer,
    )


def with_note(reason: str, note: str) -> str:
    """A dead letter's reason, at most KEPT_REASON_CHARS long, followed by `note` when there is one."""
    if len(reason) > KEPT_REASON_CHARS:
        reason = reason[:KEPT_REASON_CHARS] + "..."
    return f"{reason} ({note})" if note else reason


async def send_dead_letter(
    producer: EventProducer, record: Any, error: Exception, consumer: str, *, max_message_bytes: int | None = None
) -> DeadLetterRecorded:
    """Write the record's dead letter (id from its coordinates, cut to `max_message_bytes`) and one WARNING line
    naming topic[partition]@offset and the reason; the dead letter written."""
    letter = dead_letter(
        record,
        error,
        consumer,
        max_message_bytes=max_message_bytes,
        event_id=dead_letter_id(record.topic, record.partition, record.offset),
    )
    await producer.send(topics.DEAD_LETTERS, letter, key=record.topic)
    log.warning(
        "%s dead-lettered %s[%d]@%d (%d bytes): %s",
        consumer,
        record.topic,
        record.partition,
        record.offset,
        len(record.value or b""),
        letter.reason,
    )
    return letter


async def decode_or_dead_letter(
    codec: Codec,
    producer: EventProducer,
    record: Any,
    consumer: str,
    *,
    carries: Collection[str] | None = None,
    trust: Trust | None = None,
    max_message_bytes: int | None = None,
    dead_letters: bool = True,
) -> Event | None:
    """The record's event (see input_event), or None once it is dead-lettered (see send_dead_letter; skipped when
    `dead_letters` is false: another component owns them, see DEAD_LETTERED_BY)."""
    try:
        return input_event(codec, record, carries, trust)
    except DecodeError as error:
        if dead_letters:
            await send_dead_letter(producer, record, error, consumer, max_message_bytes=max_message_bytes)
        return None
