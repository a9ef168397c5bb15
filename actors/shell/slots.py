"""Inbox slots for a host's agents: their allocations on swarm.agents.slots, asked for where an agent has none.

The topic is compacted by agent id, so it holds each agent's latest allocation (coordinators write it there from their
journal, where the allocation is decided). A host reads it to its end, asks the regions' coordinators for the slots
its agents lack (SlotRequested), and waits for the answers, saying every SAY_S what it waits for and asking again
every ASK_AGAIN_S (an answer lost with a coordinator that crashed is answered by its successor).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.actors.slots import allocated
from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.records import TOPIC_EVENTS, input_event
from swarmlog.kafka.signing import Trust
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.records import SlotRequested
from swarmlog.topics import SLOTS

SAY_S = 5.0
ASK_AGAIN_S = 10.0
log = logging.getLogger("swarmlog.agent")


async def slots_of(
    consumer: AIOKafkaConsumer,
    producer: EventProducer,
    codec: Codec,
    trust: Trust | None,
    host: str,
    regions: Mapping[str, str],
    stopping: asyncio.Event,
) -> Mapping[str, int] | None:
    """The slot of each agent of `regions` (agent id → region), read or asked for; None when stopped meanwhile."""
    tps = [TopicPartition(SLOTS, p) for p in sorted(await producer.raw.partitions_for(SLOTS))]
    consumer.assign(tps)
    await consumer.seek_to_beginning(*tps)
    ends = await consumer.end_offsets(tps)
    held: Mapping[str, int] = {}
    loop = asyncio.get_running_loop()
    asked_at = said_at = None
    while not stopping.is_set():
        for records in (await consumer.getmany(*tps, timeout_ms=200)).values():
            for record in records:
                try:
                    held = allocated(held, input_event(codec, record, TOPIC_EVENTS[SLOTS], trust), regions)
                except DecodeError:
                    continue  # dead-lettered by the coordinators, who read the topic for its effects
        missing = {agent_id: region for agent_id, region in regions.items() if agent_id not in held}
        if not missing:
            return held
        if asked_at is None and all([await consumer.position(tp) >= ends[tp] for tp in tps]):
            asked_at = said_at = loop.time()
            await _ask(producer, host, missing)
        elif asked_at is not None and loop.time() - asked_at >= ASK_AGAIN_S:
            asked_at = loop.time()
            await _ask(producer, host, missing)
        if said_at is not None and loop.time() - said_at >= SAY_S:
            said_at = loop.time()
            _say(host, missing, len(regions))
    return None


async def _ask(producer: EventProducer, host: str, missing: Mapping[str, str]) -> None:
    """One SlotRequested per agent without a slot, keyed by its id."""
    await asyncio.gather(
        *(
            producer.send(
                SLOTS, stamp(SlotRequested, producer=host, agent_id=agent_id, region=region, host=host), key=agent_id
            )
            for agent_id, region in missing.items()
        )
    )


def _say(host: str, missing: Mapping[str, str], total: int) -> None:
    """One WARNING naming what the host waits for and what may be wrong."""
    regions = sorted(set(missing.values()))
    log.warning(
        "%s: %d of its %d agents wait for an inbox slot from the coordinator of %s; is `swarmlog coordinator "
        "--region %s` running? If it is, its share of the inbox is full: grow it with SWARMLOG_INBOX_PARTITIONS "
        "and `swarmlog topics ensure` (Kafka), then restart the coordinators, or give agents a --slot to share",
        host,
        len(missing),
        total,
        ", ".join(regions),
        regions[0],
    )
