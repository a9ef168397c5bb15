"""The inbox grows for a larger fleet (Kafka): no message moves or is lost; Tansu refuses, saying it is Kafka-only."""

from __future__ import annotations

import dataclasses

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from swarmlog.kafka.admin import ensure_topics
from swarmlog.settings import Settings
from swarmlog.topics import INBOX


async def test_growing_the_inbox_keeps_every_message_on_its_partition(own_settings: Settings) -> None:
    before = own_settings.inbox_partitions
    producer = AIOKafkaProducer(bootstrap_servers=own_settings.bootstrap)
    await producer.start()
    try:
        for slot in range(before):
            await producer.send_and_wait(INBOX, f"slot {slot}".encode(), partition=slot)
        wider = dataclasses.replace(own_settings, inbox_partitions=before * 2)
        outcomes = {o.name: o for o in await ensure_topics(wider, grow_inbox=True)}
        inbox = outcomes[INBOX]
        if own_settings.broker == "tansu":
            assert inbox.action == "mismatch" and "Kafka-only" in inbox.detail, inbox
            return
        assert (inbox.action, inbox.partitions) == ("grown", before * 2), inbox
        assert {o.action for name, o in outcomes.items() if name != INBOX} == {"exists"}
        await producer.client.force_metadata_update()
        await producer.send_and_wait(INBOX, b"new slot", partition=before * 2 - 1)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(bootstrap_servers=own_settings.bootstrap)
    await consumer.start()
    try:
        held = {}
        for slot in range(before * 2):
            tp = TopicPartition(INBOX, slot)
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            end = (await consumer.end_offsets([tp]))[tp]
            held[slot] = [r.value for r in (await consumer.getmany(tp, timeout_ms=2000)).get(tp, [])] if end else []
    finally:
        await consumer.stop()
    assert held == {
        **{slot: [f"slot {slot}".encode()] for slot in range(before)},
        **{slot: [] for slot in range(before, before * 2 - 1)},
        before * 2 - 1: [b"new slot"],
    }
    again = {o.name: o.action for o in await ensure_topics(wider, grow_inbox=True)}
    assert again[INBOX] == "exists"
