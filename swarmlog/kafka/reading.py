"""Reading partitions to their end without a consumer group: the building block of every recovery and re-read."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.protocol.metadata import MetadataRequest

from swarmlog.kafka.connection import client_options
from swarmlog.settings import Settings

POLL_MS = 100


def reader(settings: Settings, client_id: str, transactional: bool, **options: Any) -> AIOKafkaConsumer:
    """A group-less consumer reading partitions from chosen offsets (read_committed where there are transactions)."""
    return AIOKafkaConsumer(
        **client_options(settings),
        client_id=client_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed" if transactional else "read_uncommitted",
        **options,
    )


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


async def cluster_id(consumer: AIOKafkaConsumer) -> str | None:
    """The broker's cluster id (MetadataResponse v2 and later), or None where it reports none.

    aiokafka 0.14 reads the id in every MetadataResponse but keeps none of it in its cluster metadata, and the admin
    client's describe_cluster would be a connection of its own: ask one broker, on the consumer's client, for the
    metadata of no topic, as describe_cluster does."""
    client = consumer._client  # the only way to the raw MetadataResponse
    response = await client.send(client.get_random_node(), MetadataRequest([]))
    return getattr(response, "cluster_id", None) or None
