"""Reading partitions to their end without a consumer group: the building block of every recovery and re-read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from swarmlog.settings import Settings

POLL_MS = 100


def reader(settings: Settings, client_id: str, transactional: bool, **options: Any) -> AIOKafkaConsumer:
    """A group-less consumer reading partitions from chosen offsets (read_committed where there are transactions)."""
    return AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, client_id=client_id, enable_auto_commit=False,
                            auto_offset_reset="earliest",
                            isolation_level="read_committed" if transactional else "read_uncommitted", **options)


async def records_to_end(consumer: AIOKafkaConsumer, tp: TopicPartition) -> AsyncIterator[ConsumerRecord]:
    """The records of `tp` from the consumer's position to the end (last stable offset, else high watermark)."""
    while True:
        records = (await consumer.getmany(tp, timeout_ms=POLL_MS)).get(tp, [])
        for record in records:
            yield record
        stable = consumer.last_stable_offset(tp)  # -1 when reading uncommitted
        end = stable if stable is not None and stable >= 0 else consumer.highwater(tp)
        if not records and end is not None and await consumer.position(tp) >= end:
            return
