"""Missions from the non-Python producers in clients/ (Node, Java, kcat) run on a real coordinator, or dead-letter."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from client_producers import EACH_PRODUCER, REGION, ROOT, Producer, completed, produce, region_0
from coordinator.live import eventually, journal

from swarmlog import topics
from swarmlog.kafka.collecting import decoded
from swarmlog.kafka.producer import idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.records import DeadLetterRecorded, MissionAccepted, MissionCompleted
from swarmlog.settings import Settings
from swarmlog.topics import spec_for

pytestmark = [pytest.mark.kafka_only, EACH_PRODUCER]
SCHEMAS = ROOT / "schemas"


async def dead_letters(settings: Settings, mission_id: str) -> list[DeadLetterRecorded]:
    """The DeadLetterRecorded events of the mission's record on swarm.missions, one by event id (every coordinator
    writes the same one); garbage on the dead-letter topic itself (other tests write some) is passed over."""
    consumer = reader(settings, "test-deadletter", idempotence_supported(settings))
    await consumer.start()
    try:
        partitions = [
            TopicPartition(topics.DEAD_LETTERS, index)
            for index in range(spec_for(settings, topics.DEAD_LETTERS).partitions)
        ]
        consumer.assign(partitions)
        events = []
        for tp in partitions:
            await consumer.seek_to_beginning(tp)
            events += [event async for r in records_to_end(consumer, tp) if (event := decoded(default_codec(), r))]
    finally:
        await consumer.stop()
    mine = [
        event for event in events if isinstance(event, DeadLetterRecorded) and event.origin_key == mission_id.encode()
    ]
    return list({event.event_id: event for event in mine}.values())


def schemas_copy(tmp_path: Path, *, extra_field: bool = False, stale_lock: bool = False) -> Path:
    """A copy of schemas/ as a producer outside this build might hold it: an edited .avsc, or another build's lock."""
    copy = tmp_path / "schemas"
    shutil.copytree(SCHEMAS / "avro", copy / "avro")
    lock = (SCHEMAS / "fingerprints.lock").read_text()
    latest = default_catalog().latest("MissionSubmitted")  # what the producers write
    if extra_field:
        path = copy / "avro" / "MissionSubmitted" / latest.path.name
        schema = json.loads(path.read_text())
        schema["fields"].append({"name": "priority", "type": "int", "default": 5})
        path.write_text(json.dumps(schema))
    if stale_lock:
        lock = lock.replace(f"{latest.label} {latest.fingerprint.hex()}", f"{latest.label} 0123456789abcdef")
    (copy / "fingerprints.lock").write_text(lock)
    return copy


async def test_a_mission_from_the_client_completes(producer: Producer, settings: Settings, tmp_path: Path):
    capability = f"{producer.name}-{uuid.uuid4().hex[:8]}"
    async with region_0(settings, capability, producer.first_slot, tmp_path):
        mission_id = await produce(
            producer,
            settings,
            "--region",
            REGION,
            "--title",
            f"from {producer.name}",
            "--task",
            "a=say a",
            "--task",
            "b=say b",
            "--capability",
            capability,
        )
        events = await eventually(lambda: completed(settings, mission_id))
    [accepted] = [event for event in events if isinstance(event, MissionAccepted)]
    [done] = [event for event in events if isinstance(event, MissionCompleted)]
    assert accepted.title == f"from {producer.name}"
    assert [(t.task_id, t.prompt, t.required_capabilities) for t in accepted.tasks] == [
        ("a", "say a", [capability]),
        ("b", "say b", [capability]),
    ]
    assert (done.success, done.tasks_completed) == (True, 2)


async def test_a_mission_the_coordinator_cannot_read_is_dead_lettered(
    producer: Producer, settings: Settings, tmp_path: Path
):
    # Node and Java fingerprint the edited schema themselves; the kcat script takes the fingerprint from the lock.
    foreign = schemas_copy(tmp_path, extra_field=producer.name != "kcat", stale_lock=producer.name == "kcat")
    async with region_0(settings, f"{producer.name}-{uuid.uuid4().hex[:8]}", producer.first_slot, tmp_path):
        mission_id = await produce(
            producer, settings, "--region", REGION, "--task", "a=say a", "--schemas", str(foreign)
        )
        [letter] = await eventually(lambda: dead_letters(settings, mission_id))
    assert letter.origin_topic == "swarm.missions"
    assert letter.error_type == "DecodeError"
    assert "unknown schema fingerprint" in letter.reason, letter.reason
    assert letter.payload[:2] == b"\xc3\x01"
    assert not await journal(settings, REGION, mission_id)
