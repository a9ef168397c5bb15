"""The streams worker as a subprocess on the test's broker, and a client that produces and reads events."""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import msgspec
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from swarmlog.envelope import now_ms
from swarmlog.errors import DecodeError
from swarmlog.replay.diff import diff_table, read_table
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import HEADER_SIZE, MAGIC, decode, encode
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import DeadlockDetected, from_fields
from swarmlog.settings import Settings
from swarmlog.streams import budgets, registry
from swarmlog.topics import spec_for

READY_TIMEOUT_S = 90
LARGE_BYTES = 2_000_000
"""The size of the random garbage record: twice what the catalog's topics take unless told otherwise."""
Coordinates = tuple[str, int, int]


def now_event(name: str, **fields: Any) -> Event:
    """An event of record `name` occurring now with a fresh id, as an agent writes it."""
    envelope = {"event_id": uuid.uuid4().hex, "occurred_at": now_ms(), "correlation_id": None, "causation_id": None}
    return from_fields(name, {**envelope, "producer": "test", **fields})


def agent_of(event: Event) -> str | None:
    """The agent a registry, heartbeat, usage or budget event is about; None for any other event."""
    return registry.agent_of(event) or budgets.agent_of(event)


def cycle_of(event: Event) -> list[str]:
    """The agents of a DeadlockDetected's cycle; none for any other event."""
    return event.cycle if isinstance(event, DeadlockDetected) else []


def registered(agent: str) -> Event:
    """An agent's registration, now."""
    return now_event(
        "AgentRegistered",
        agent_id=agent,
        capabilities=["code"],
        model="smollm2",
        brain="scripted",
        node="n1",
        gpu=None,
        region="r1",
        slot=0,
    )


def heartbeat(agent: str, registration: Event, sequence: int) -> Event:
    """A heartbeat of the agent's run `registration`, now."""
    return now_event(
        "AgentHeartbeat",
        agent_id=agent,
        registration_id=registration.event_id,
        sequence=sequence,
        status="IDLE",
        in_flight_task=None,
        region="r1",
        slot=0,
    )


class Worker:
    """`swarmlog streams` in a subprocess with its own app id and data dir; logs go to a file."""

    def __init__(self, bootstrap: str, broker_kind: str, redis_url: str, data_dir: Path, **knobs: int) -> None:
        self.data_dir = data_dir
        self.app_id = f"streams-{uuid.uuid4().hex[:8]}"
        self.log = data_dir.with_suffix(".log")
        self.env = {
            **os.environ,
            "SWARMLOG_BROKER": broker_kind,
            "SWARMLOG_BOOTSTRAP": bootstrap,
            "SWARMLOG_REDIS_URL": redis_url,
            "SWARMLOG_STREAMS_APP_ID": self.app_id,
            "SWARMLOG_STREAMS_DATA_DIR": str(data_dir),
        }
        self.env.update({f"SWARMLOG_STREAMS_{name.upper()}": str(value) for name, value in knobs.items()})
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        """Start the worker and wait until Faust says it is ready; one that never is gets killed, not left running."""
        offset = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "swarmlog", "streams"], env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b"[^Worker]: Ready" not in self.log.read_bytes()[offset:]:
            assert self.process.poll() is None, f"worker exited with {self.process.returncode}; see {self.log}"
            if time.monotonic() >= deadline:
                self.stop(signal.SIGKILL)
                raise AssertionError(f"worker not ready in {READY_TIMEOUT_S} s; see {self.log}")
            time.sleep(0.2)

    def stop(self, sig: signal.Signals = signal.SIGTERM, timeout_s: float = 30) -> int:
        """Send `sig` and wait for the exit code."""
        assert self.process is not None
        self.process.send_signal(sig)
        return self.process.wait(timeout_s)

    def table(self, name: str) -> dict[str, Any]:
        """A stopped worker's table as its changelog holds it (what a worker restores it from)."""
        settings = Settings(broker=self.env["SWARMLOG_BROKER"], bootstrap=self.env["SWARMLOG_BOOTSTRAP"])
        return asyncio.run(read_table(settings, f"{self.app_id}-{name}-changelog", self.app_id))[0]


@contextlib.contextmanager
def running_worker(bootstrap: str, broker_kind: str, redis_url: str, data_dir: Path, **knobs: int) -> Iterator[Worker]:
    """A started worker, killed at the end if the test left it running."""
    started = Worker(bootstrap, broker_kind, redis_url, data_dir, **knobs)
    started.start()
    try:
        yield started
    finally:
        if started.process is not None and started.process.poll() is None:
            started.stop(signal.SIGKILL)


def stop_swarm(processes: Iterable[subprocess.Popen], worker: Worker) -> None:
    """SIGTERM every process, wait for each (SIGKILL past 30 s), then stop the worker if it still runs."""
    processes = list(processes)
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
    if worker.process is not None and worker.process.poll() is None:
        worker.stop()


class Client:
    """Produces events (or raw bytes) and reads topics from the beginning, on the test's broker."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap

    def send(self, topic: str, key: str, *events: Event | bytes) -> None:
        """Produce each event (encoded) or raw payload under `key`, in order."""
        asyncio.run(self._send(topic, key, [e if isinstance(e, bytes) else encode(e) for e in events]))

    def read(
        self, topic: str, keep: Callable[[Event], bool], until: Callable[[list[Event]], bool], timeout_s: float
    ) -> list[Event]:
        """The decodable events of `topic` that `keep` accepts, once `until` holds for them or the timeout passes."""
        return asyncio.run(self._read(topic, keep, until, timeout_s))

    def send_records(
        self, topic: str, key: str, payloads: Iterable[bytes], partition: int | None = None
    ) -> list[Coordinates]:
        """Produce raw payloads (up to LARGE_BYTES and more) under `key`, in order, to `partition` or the key's; where
        each landed."""
        return asyncio.run(self.send_records_async(topic, key, list(payloads), partition))

    def send_now(self, topic: str, key: str, make: Callable[[], Event]) -> tuple[Event, int]:
        """Connect, then stamp the event `make` builds and produce it; returns it with the wall-clock ms of its ack."""
        return asyncio.run(self._send_now(topic, key, make))

    async def _send(self, topic: str, key: str, payloads: list[bytes]) -> None:
        async with self._producer() as producer:
            for payload in payloads:
                await producer.send_and_wait(topic, payload, key=key.encode())

    async def send_records_async(
        self, topic: str, key: str, payloads: list[bytes], partition: int | None = None
    ) -> list[Coordinates]:
        """`send_records`, in a running event loop."""
        async with self._producer(max_request_size=2 * LARGE_BYTES) as producer:
            sent = [
                await producer.send_and_wait(topic, payload, key=key.encode(), partition=partition)
                for payload in payloads
            ]
        return [(topic, metadata.partition, metadata.offset) for metadata in sent]

    async def _send_now(self, topic: str, key: str, make: Callable[[], Event]) -> tuple[Event, int]:
        async with self._producer() as producer:
            event = make()
            await producer.send_and_wait(topic, encode(event), key=key.encode())
            return event, int(time.time() * 1000)

    @contextlib.asynccontextmanager
    async def _producer(self, **options: Any) -> AsyncIterator[AIOKafkaProducer]:
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, **options)
        await producer.start()
        try:
            yield producer
        finally:
            await producer.stop()

    async def _read(
        self, topic: str, keep: Callable[[Event], bool], until: Callable[[list[Event]], bool], timeout_s: float
    ) -> list[Event]:
        consumer = AIOKafkaConsumer(
            topic, bootstrap_servers=self.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False
        )
        await consumer.start()
        kept: list[Event] = []
        deadline = time.monotonic() + timeout_s
        try:
            while time.monotonic() < deadline and not until(kept):
                batches = await consumer.getmany(timeout_ms=200)
                kept += [event for record in _records(batches) if (event := _decoded(record.value)) and keep(event)]
        finally:
            await consumer.stop()
        return kept


def _records(batches: dict) -> Iterator[Any]:
    for records in batches.values():
        yield from records


def _decoded(payload: bytes | None) -> Event | None:
    try:
        return decode(payload or b"")
    except DecodeError:  # another test's garbage: not an event
        return None


TABLES = ("registry", "waitgraph", "budgets")


async def table_differences(settings: Settings, app_id: str, marker: str, tables: Iterable[str] = TABLES) -> list:
    """Entries keyed with `marker` where a table's changelog and the replayed fold of its topics differ."""
    found = []
    for table in tables:
        comparison = await diff_table(settings, table, app_id)
        found += [(table, d) for d in comparison.differences if marker in d.key]
    return found


async def tables_settled(
    settings: Settings, app_id: str, marker: str, tables: Iterable[str] = TABLES, timeout_s: float = 30
) -> list:
    """Wait (up to `timeout_s`) until the running worker's tables hold everything on their topics; the differences
    left (none once settled)."""
    deadline = time.monotonic() + timeout_s
    while (differences := await table_differences(settings, app_id, marker, tables)) and time.monotonic() < deadline:
        await asyncio.sleep(1)
    return differences


def garbage(real: Event, wrong: Event, seed: int) -> dict[str, bytes]:
    """Records a reader cannot use, by kind: broken bytes of `real`'s kind, random bytes, `wrong` (an event of a kind
    the topic does not carry) and `real` with an invariant broken. A duplicate of a real event is not garbage."""
    rng = random.Random(seed)
    good = encode(real)
    records = {
        "empty": b"",
        "one byte": b"\x00",
        "magic alone": MAGIC,
        "truncated body": good[:-3],
        "overlong body": good + b"\x00\x01",
        "known fingerprint, random body": good[:HEADER_SIZE] + rng.randbytes(48),
        "2 MB of random bytes": rng.randbytes(LARGE_BYTES),
        "another kind of event": encode(wrong),
        "a broken invariant": breaking_invariants(real, producer=""),
    }
    decoding = [kind for kind, payload in records.items() if kind != "another kind of event" and _decodes(payload)]
    assert not decoding, f"{decoding} garbage decodes: pick another seed"
    return records


def _decodes(payload: bytes) -> bool:
    try:
        decode(payload)
    except DecodeError:
        return False
    return True


def breaking_invariants(event: Event, **fields: Any) -> bytes:
    """`event` with `fields` changed, encoded as its schema allows although its invariants do not."""
    version = default_catalog().latest(event.name)
    body = io.BytesIO()
    fastavro.schemaless_writer(body, version.parsed, msgspec.to_builtins(event, builtin_types=(bytes,)) | fields)
    return MAGIC + version.fingerprint + body.getvalue()


@contextlib.contextmanager
def large_records_taken(settings: Settings, topics: Iterable[str]) -> Iterator[None]:
    """Let `topics` take records of LARGE_BYTES on Apache Kafka (as an operator may), then back to the catalog's
    configuration; other brokers as they are."""
    if settings.broker != "kafka":
        yield
        return
    topics = tuple(topics)
    asyncio.run(_configure(settings, topics, large=True))
    try:
        yield
    finally:
        asyncio.run(_configure(settings, topics, large=False))


async def _configure(settings: Settings, topics: Iterable[str], large: bool) -> None:
    resources = []
    for topic in topics:  # AlterConfigs replaces a topic's whole configuration: give all of it
        configs = spec_for(settings, topic).configs(settings)
        if large:
            configs["max.message.bytes"] = str(2 * LARGE_BYTES)
        resources.append(ConfigResource(ConfigResourceType.TOPIC, topic, configs=configs))
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        for response in await admin.alter_configs(resources):
            assert all(resource[0] == 0 for resource in response.resources), response
    finally:
        await admin.close()
