"""Recovery: the last checkpoint, brought up to date with the agent's own task events written after it."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.actors.domain import evolve, initial
from swarmlog.actors.store import Checkpoint
from swarmlog.errors import DecodeError, ServiceError
from swarmlog.schemas.codec import Codec

TIMEOUT_S = 60


async def recover(consumer: AIOKafkaConsumer, codec: Codec, agent_id: str, inbox: TopicPartition,
                  tasks: list[TopicPartition], saved: Checkpoint | None) -> Checkpoint:
    """A new agent starts at the current ends; a known one folds its task events (`tasks`) since its checkpoint."""
    ends = await consumer.end_offsets([*tasks, inbox])
    log = {tp.partition: ends[tp] for tp in tasks}
    if saved is None:
        return Checkpoint(initial(agent_id), ends[inbox], log)
    try:
        async with asyncio.timeout(TIMEOUT_S):
            state = await _fold_tail(consumer, codec, saved, tasks, ends)
    except TimeoutError:
        raise ServiceError(f"agent {agent_id} could not read its task events to its end within {TIMEOUT_S} s; "
                           "is the broker healthy?") from None
    return Checkpoint(state, saved.inbox, log)


async def _fold_tail(consumer: AIOKafkaConsumer, codec: Codec, saved: Checkpoint, tasks: list[TopicPartition],
                     ends: dict[TopicPartition, int]):
    """The checkpoint's state with every later task event folded in (other agents' events change nothing)."""
    state = saved.state
    pending = [tp for tp in tasks if saved.log.get(tp.partition, 0) < ends[tp]]
    consumer.assign(pending)
    for tp in pending:
        consumer.seek(tp, saved.log.get(tp.partition, 0))
    while pending:
        for tp, records in (await consumer.getmany(*pending, timeout_ms=500)).items():
            for record in records:
                if record.offset >= ends[tp]:
                    continue
                try:
                    state = evolve(state, codec.decode_record(record.value or b"", tp.topic, tp.partition, record.offset))
                except DecodeError:
                    continue  # not ours to dead-letter: the topic's consumers do that
        pending = [tp for tp in pending if await consumer.position(tp) < ends[tp]]
    return state
