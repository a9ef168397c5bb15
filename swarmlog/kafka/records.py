"""Consumed records to events: decode with coordinates, or route the raw bytes to the dead-letter topic."""

from __future__ import annotations

from typing import Any

from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.events import Event

DEAD_LETTER_TOPIC = "swarm.deadletter"


def dead_letter(record: Any, error: Exception, consumer: str) -> Event:
    """The DeadLetterRecorded event that keeps an unusable record's bytes, origin and reason."""
    return stamp(
        "DeadLetterRecorded",
        producer=consumer,
        origin_topic=record.topic,
        origin_partition=record.partition,
        origin_offset=record.offset,
        origin_key=record.key,
        payload=record.value or b"",
        error_type=type(error).__name__,
        reason=str(error),
        consumer=consumer,
    )


async def decode_or_dead_letter(codec: Codec, producer: EventProducer, record: Any, consumer: str) -> Event | None:
    """The record's event, or None after its bytes were written to the dead-letter topic."""
    try:
        return codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
    except DecodeError as error:
        await producer.send(DEAD_LETTER_TOPIC, dead_letter(record, error, consumer), key=record.topic)
        return None
