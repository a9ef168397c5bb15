"""The inbox grows for a larger fleet (Kafka): no message moves or is lost, and a running coordinator allocates slots
from the new partitions; Tansu refuses, saying it is Kafka-only."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from swarmlog.coordinator.shell.service import CoordinatorService
from swarmlog.envelope import stamp
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import SlotAllocated, SlotRequested
from swarmlog.settings import Settings
from swarmlog.topics import INBOX, SLOTS


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


@pytest.mark.kafka_only
async def test_a_running_coordinator_allocates_slots_from_the_partitions_the_inbox_grew_by(
    own_settings: Settings, tmp_path: Path
) -> None:
    settings, regions = own_settings, len(own_settings.region_names)
    async with EventProducer(settings, client_id="test-inbox-growth") as producer:
        inbox = len(await producer.raw.partitions_for(INBOX))
        share = range(0, inbox, regions)  # region-0's partitions
        agents = [f"grown-{n}" for n in range(len(share) + 1)]
        async with (
            Collector(settings, SLOTS, start="end", keep=lambda e: isinstance(e, SlotAllocated)) as answers,
            CoordinatorService(settings, "region-0", data_dir=tmp_path, inbox_every_s=0.5),
        ):
            await _ask(producer, agents)
            await answers.wait_for(lambda: len(_slots(answers)) == len(share), timeout_s=60)
            assert sorted(_slots(answers).values()) == list(share), "the share is full; the last agent waits"

            wider = dataclasses.replace(settings, inbox_partitions=inbox * 2)
            assert {o.name: o.action for o in await ensure_topics(wider, grow_inbox=True)}[INBOX] == "grown"
            last = agents[-1]
            deadline = time.monotonic() + 60
            while last not in _slots(answers):  # its host asks again until answered (every 10 s; here every 2 s)
                assert time.monotonic() < deadline, "no slot from the grown inbox within 60 s"
                await _ask(producer, [last])
                with contextlib.suppress(TimeoutError):
                    await answers.wait_for(lambda: last in _slots(answers), timeout_s=2)
    slot = _slots(answers)[last]
    assert inbox <= slot < inbox * 2 and slot % regions == 0, slot


async def _ask(producer: EventProducer, agents: list[str]) -> None:
    """A SlotRequested to region-0 for each of `agents`, as a fleet host asks."""
    for agent_id in agents:
        event = stamp(SlotRequested, producer="test", agent_id=agent_id, region="region-0", host="test")
        await producer.send(SLOTS, event, key=agent_id)


def _slots(answers: Collector) -> dict[str, int]:
    """The slot allocated to each agent, as read so far."""
    return {event.agent_id: event.slot for event in answers.named(SlotAllocated)}
