"""Recovery: the region's journal partition folded to its end, starting from a snapshot when one still matches."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.coordinator import State
from swarmlog.coordinator.shell.folded import Folded
from swarmlog.errors import ServiceError
from swarmlog.kafka.reading import records_to_end
from swarmlog.schemas.codec import Codec

JOURNAL = "swarm.coordinator.journal"


async def recover(consumer: AIOKafkaConsumer, codec: Codec, partition: int, empty: State, snapshot: Folded | None,
                  timeout_s: float) -> Folded:
    """The journal partition folded to its end: the snapshot's tail when the snapshot is still a prefix, else all."""
    tp = TopicPartition(JOURNAL, partition)
    consumer.assign([tp])
    try:
        async with asyncio.timeout(timeout_s):
            if snapshot is not None and snapshot.last and await _still_there(consumer, codec, tp, snapshot):
                return await _fold_to_end(consumer, codec, tp, snapshot)
            await consumer.seek_to_beginning(tp)
            return await _fold_to_end(consumer, codec, tp, Folded(empty))
    except TimeoutError:
        raise ServiceError(f"recovery of {tp.topic}[{partition}] took over {timeout_s} s; is the broker healthy? "
                           "A snapshot under the data dir shortens it") from None


async def _still_there(consumer: AIOKafkaConsumer, codec: Codec, tp: TopicPartition, snapshot: Folded) -> bool:
    """Whether the journal still holds the snapshot's last event at its offset (not a reset or another broker)."""
    consumer.seek(tp, snapshot.offset)
    first = await anext(aiter(records_to_end(consumer, tp)), None)
    consumer.seek(tp, snapshot.offset + 1)
    return first is not None and first.offset == snapshot.offset and (
        codec.decode_record(first.value, tp.topic, tp.partition, first.offset).event_id == snapshot.last[-1].event_id)


async def _fold_to_end(consumer: AIOKafkaConsumer, codec: Codec, tp: TopicPartition, folded: Folded) -> Folded:
    """`folded` advanced over every journal event from the consumer's position to the end."""
    async for record in records_to_end(consumer, tp):
        folded = folded.fold(codec.decode_record(record.value, tp.topic, tp.partition, record.offset), record.offset)
    return folded
