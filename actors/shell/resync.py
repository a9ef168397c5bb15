"""Re-sync: the agent's ground-truth document read again from its compacted topic, to its end."""

from __future__ import annotations

from aiokafka import TopicPartition

from swarmlog.actors.groundtruth import GroundTruth, evolve_ground_truth
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import Codec
from swarmlog.settings import Settings
from swarmlog.topics import GROUND_TRUTH


async def read_ground_truth(settings: Settings, codec: Codec, truth: GroundTruth, client_id: str) -> GroundTruth:
    """`truth` brought up to the latest version of its document on the topic (undecodable records are skipped)."""
    consumer = reader(settings, client_id, idempotence_supported(settings))
    await consumer.start()
    try:
        tp = TopicPartition(GROUND_TRUTH, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        async for record in records_to_end(consumer, tp):
            try:
                truth = evolve_ground_truth(
                    truth, codec.decode_record(record.value or b"", tp.topic, tp.partition, record.offset)
                )
            except DecodeError:
                continue  # the topic's writers are operators; a bad record is theirs to fix, not a reason to stop
        return truth
    finally:
        await consumer.stop()
