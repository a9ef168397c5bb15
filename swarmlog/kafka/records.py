"""Consumed records to events: decode with coordinates, or route the raw bytes to the dead-letter topic."""

from __future__ import annotations

from typing import Any

from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.events import Event

DEAD_LETTER_TOPIC = "swarm.deadletter"
DEAD_LETTER_MARGIN = 16_384
"""Bytes of a dead letter's limit kept for what is not the kept bytes: its other fields, the record and batch headers."""
KEPT_KEY_BYTES = 1024
"""A key longer than this is cut first when a dead letter would not fit."""
KEPT_REASON_CHARS = 2000


def fitted(payload: bytes, key: bytes | None, max_message_bytes: int) -> tuple[bytes, bytes | None, str]:
    """The payload and key a dead letter can keep within `max_message_bytes` (the dead-letter topic's limit), and a
    note saying what was cut ("" when nothing was): a record as large as its own topic allows would not fit whole
    with the dead letter's other fields, and one over the limit would make the dead letter itself fail."""
    room = max(0, max_message_bytes - DEAD_LETTER_MARGIN)
    if len(payload) + len(key or b"") <= room:
        return payload, key, ""
    kept_key = None if key is None else key[:min(len(key), KEPT_KEY_BYTES, room)]
    kept = payload[:max(0, room - len(kept_key or b""))]
    cut = [f"payload cut to its first {len(kept)} of {len(payload)} bytes"]
    if key is not None and len(kept_key or b"") < len(key):
        cut.append(f"key cut to its first {len(kept_key or b'')} of {len(key)} bytes")
    return kept, kept_key, "; ".join(cut) + " to fit the dead-letter topic"


def dead_letter(record: Any, error: Exception, consumer: str, *, max_message_bytes: int | None = None) -> Event:
    """The DeadLetterRecorded event that keeps an unusable record's bytes, origin and reason; with
    `max_message_bytes`, bytes that would not fit in a message of that size are cut (the reason says so)."""
    payload, key, note = record.value or b"", record.key, ""
    if max_message_bytes is not None:
        payload, key, note = fitted(payload, key, max_message_bytes)
    return stamp(
        "DeadLetterRecorded",
        producer=consumer,
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


async def decode_or_dead_letter(codec: Codec, producer: EventProducer, record: Any, consumer: str) -> Event | None:
    """The record's event, or None after its bytes were written to the dead-letter topic."""
    try:
        return codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
    except DecodeError as error:
        await producer.send(DEAD_LETTER_TOPIC, dead_letter(record, error, consumer), key=record.topic)
        return None
