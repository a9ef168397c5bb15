"""Missions from the non-Python producers in clients/ (Node, Java, kcat) run on a real coordinator, or dead-letter."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from coordinator.live import crew, eventually, journal

from swarmlog import topics
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.kafka.collecting import decoded
from swarmlog.kafka.producer import idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import DeadLetterRecorded, MissionAccepted, MissionCompleted
from swarmlog.settings import Settings
from swarmlog.topics import spec_for

pytestmark = pytest.mark.kafka_only

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
REGION = "region-0"
SETUP_HINT = "run scripts/setup-clients.sh"


@dataclasses.dataclass(frozen=True)
class Producer:
    """One client of clients/: how to run it, what it needs, and the first inbox slot of its test agents."""

    name: str
    command: tuple[str, ...]
    tools: tuple[str, ...]
    files: tuple[str, ...]
    first_slot: int

    def missing(self) -> str | None:
        """Why this producer cannot run here, or None."""
        absent = [tool for tool in self.tools if shutil.which(tool) is None]
        absent += [path for path in self.files if not (ROOT / path).exists()]
        return f"{self.name} producer: missing {', '.join(absent)}; {SETUP_HINT}" if absent else None


PRODUCERS = (
    Producer("node", ("node", "clients/node/produce-mission.mjs"), ("node",), ("clients/node/node_modules",), 40),
    Producer(
        "java",
        ("java", "-jar", "clients/java/target/produce-mission.jar"),
        ("java",),
        ("clients/java/target/produce-mission.jar",),
        44,
    ),
    Producer(
        "kcat",
        ("bash", "clients/kcat/produce-mission.sh"),
        ("kcat", "jq", "xxd", "java"),
        (".cache/avro-tools/avro-tools-1.12.2.jar",),
        48,
    ),
)


@pytest.fixture(params=PRODUCERS, ids=[producer.name for producer in PRODUCERS])
def producer(request: pytest.FixtureRequest) -> Producer:
    """Each producer in turn; skipped, with what is missing, where its toolchain is absent."""
    reason = request.param.missing()
    if reason:
        pytest.skip(reason)
    return request.param


@contextlib.asynccontextmanager
async def region_0(settings: Settings, capability: str, first_slot: int, data_dir: Path) -> AsyncIterator[None]:
    """Two scripted agents with a capability unique to the test, and region-0's coordinator, while the block runs."""
    async with (
        crew(settings, REGION, 2, capability, first_slot),
        CoordinatorService(settings, REGION, data_dir=data_dir),
    ):
        yield


async def produce(producer: Producer, settings: Settings, *args: str) -> str:
    """Run the producer (without blocking the coordinator's event loop); the mission id it prints."""
    process = await asyncio.create_subprocess_exec(
        *producer.command,
        "--bootstrap",
        settings.bootstrap or "",
        *args,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode == 0, f"{producer.name} producer failed ({process.returncode}): {err.decode()}"
    return out.decode().strip()


async def completed(settings: Settings, mission_id: str) -> list[Event] | None:
    """The mission's events in region-0's journal once it has completed."""
    events = await journal(settings, REGION, mission_id)
    return events if any(isinstance(event, MissionCompleted) for event in events) else None


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
    if extra_field:
        path = copy / "avro" / "MissionSubmitted" / "v1.avsc"
        schema = json.loads(path.read_text())
        schema["fields"].append({"name": "priority", "type": "int", "default": 5})
        path.write_text(json.dumps(schema))
    if stale_lock:
        lock = lock.replace("MissionSubmitted v1 d091a1efb68bdc71", "MissionSubmitted v1 0123456789abcdef")
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
