"""An agent host: one process running agent actors that share its Kafka clients, store, memory bus and ground truth.

`swarmlog agent` is a host of one; `swarmlog fleet` a host of many (a node with 8 GPUs runs 8, a test rig 2,000
scripted ones). Each actor keeps its own identity, slot, checkpoint (one key in the host's store), registration,
heartbeats and recovery. What is shared is what costs per client: one producer, one consumer over every actor's inbox
partition and the control and registry partitions, one RocksDB, one memory bus connection, one ground-truth re-sync.

The host reads, decodes control and registry records once, and hands each record to the actors it concerns: an inbox
partition's records to the actors on that slot (each takes them when it is ready, so a busy actor holds no one else
up), a budget event or a drain to its agent, a death to the agent declared dead, the whole registry to actors that
ask peers. A slot whose actors have MAILBOX_LIMIT records waiting is paused until they catch up, so an inbox read from
the log start does not fill memory. An actor whose effect fails stops the others (they drain and deregister) and the
host exits with its error: restarted, every actor resumes from its checkpoint. kill -9 of the host is the death of
all its actors at once, declared by liveness like any other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from swarmlog.actors.domain import PROJECTION
from swarmlog.actors.groundtruth import GroundTruth
from swarmlog.actors.memory.semantic import SemanticMemory
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.actors.shell.mailbox import Mailbox, Notice
from swarmlog.actors.shell.outbox import Outbox
from swarmlog.actors.shell.recovery import Recovered, recover
from swarmlog.actors.shell.resync import read_ground_truth
from swarmlog.actors.shell.slots import slots_of
from swarmlog.actors.shell.store import AgentStore, Checkpoint
from swarmlog.artifacts import open_store
from swarmlog.errors import ConfigError, DecodeError, SwarmlogError
from swarmlog.kafka.connection import client_options
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import cluster_id
from swarmlog.kafka.records import TOPIC_EVENTS, input_event
from swarmlog.kafka.signing import trust_for
from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.metrics import Sensor
from swarmlog.redis_connection import RedisAccess
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    BudgetExceeded,
    BudgetRestored,
    DrainRequested,
    ResyncRequested,
)
from swarmlog.settings import Settings
from swarmlog.topics import CONTROL, INBOX, REGISTRY

MAILBOX_LIMIT = 256  # inbox records waiting for one actor before its slot is paused
log = logging.getLogger("swarmlog.agent")


class Actor(Protocol):
    """An agent actor as its host drives it (actors/shell/agent.py)."""

    mailbox: Mailbox

    @property
    def config(self) -> AgentConfig: ...

    def place(self, slot: int) -> None: ...
    async def register(self, host: AgentHost, checkpoint: Checkpoint) -> tuple[TopicPartition, int]: ...
    async def serve(self) -> None: ...
    def stop(self) -> None: ...


class AgentHost:
    """Runs its actors until every one has stopped (SIGTERM: `stop`), on one set of clients."""

    def __init__(
        self, actors: Sequence[Actor], settings: Settings, name: str, store_path: Path, sensor: Sensor
    ) -> None:
        ids = [actor.config.agent_id for actor in actors]
        if not ids or len(set(ids)) < len(ids):
            raise ConfigError(f"a host runs one or more agents with distinct ids, not {ids}")
        self.settings, self.name, self.sensor = settings, name, sensor
        self.codec = codec_for(settings.schema_registry_url)
        self.trust = trust_for(settings)
        self.artifacts = open_store(settings)
        self.wait = BrokerWait(sensor, settings.bootstrap or "", f"take the events of {name}")
        self._actors = {actor.config.agent_id: actor for actor in actors}
        self._askers = [actor for actor in actors if actor.config.ask_peers]  # they follow the registry's peers
        self._store_path = store_path
        self._truths = {actor.config.ground_truth: GroundTruth(actor.config.ground_truth) for actor in actors}
        self._resync_s = min(actor.config.resync_s for actor in actors)
        self._resync_now = asyncio.Event()
        self._on_slot: dict[TopicPartition, list[Actor]] = {}
        self._paused: set[TopicPartition] = set()
        self._stopping = asyncio.Event()

    def stop(self) -> None:
        """Begin draining every actor."""
        self._stopping.set()
        for actor in self._actors.values():
            actor.stop()

    def truth(self, document: str) -> GroundTruth:
        """The latest version of a ground-truth document this host has read."""
        return self._truths[document]

    def resync_now(self) -> None:
        """Re-read the ground truth at once."""
        self._resync_now.set()

    async def run(self) -> None:
        """Start the shared clients, recover and register every actor, serve them until all have stopped."""
        store = AgentStore(self._store_path)
        consumer = AIOKafkaConsumer(
            **client_options(self.settings),
            client_id=self.name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        memory = SemanticMemory(RedisAccess.of(self.settings), self.settings.memory_flush_ms)
        try:
            async with EventProducer(self.settings, client_id=self.name) as producer, memory:
                await consumer.start()
                self.producer, self.store, self.memory = producer, store, memory
                self.outbox = Outbox(producer, self.settings, self.wait)
                if not await self._placed(consumer):
                    return  # stopped while waiting for slots
                await self._check_slots()
                recovered = await self._recover(consumer, store)
                await self._resync()  # before registering, so the first task already sees the current ground truth
                landed = await asyncio.gather(
                    *(actor.register(self, recovered[agent_id].checkpoint) for agent_id, actor in self._actors.items())
                )
                await self._assign(consumer, recovered, landed)
                await self._serve(consumer)
        finally:
            await consumer.stop()
            store.close()

    async def partitions(self, topic: str) -> list[TopicPartition]:
        """Every partition of a topic (the producer waits for its metadata)."""
        return [TopicPartition(topic, p) for p in sorted(await self.producer.raw.partitions_for(topic))]

    async def _placed(self, consumer: AIOKafkaConsumer) -> bool:
        """Give every actor without a slot the one allocated to it; False when stopped while waiting for them."""
        unplaced = {
            agent_id: actor.config.region for agent_id, actor in self._actors.items() if actor.config.slot is None
        }
        if not unplaced:
            return True
        found = await slots_of(consumer, self.producer, self.codec, self.trust, self.name, unplaced, self._stopping)
        if found is None:
            return False
        for agent_id, slot in found.items():
            self._actors[agent_id].place(slot)
        log.info("%s: inbox slots allocated to %d agents", self.name, len(found))
        return True

    async def _check_slots(self) -> None:
        """A ConfigError when an actor's slot is not a partition of the inbox topic (it would wait on it forever)."""
        count = len(await self.partitions(INBOX))
        for actor in self._actors.values():
            if _slot(actor) >= count:
                raise ConfigError(
                    f"agent {actor.config.agent_id}: slot {_slot(actor)} is not a partition of "
                    f"{INBOX}, which has {count} (slots 0-{count - 1}); give the agent a slot below "
                    f"{count}, or create the topics with more inbox partitions (SWARMLOG_INBOX_PARTITIONS)"
                )

    async def _recover(self, consumer: AIOKafkaConsumer, store: AgentStore) -> dict[str, Recovered]:
        """Every actor's checkpoint, brought up to date in one read of the projection's topics, and saved."""
        started = time.monotonic()
        folded = [tp for topic in PROJECTION.topics for tp in await self.partitions(topic)]
        saved = {
            agent_id: (TopicPartition(INBOX, _slot(actor)), store.load(agent_id))
            for agent_id, actor in self._actors.items()
        }
        recovered = await recover(consumer, self.codec, saved, folded, await cluster_id(consumer), self.trust)
        for agent_id, outcome in recovered.items():
            if outcome.stale is not None:
                log.warning(
                    "agent %s: the checkpoint in %s is stale: %s; rebuilt from the log instead (%s, and "
                    "inbox %d, from the log start). Nothing is lost or redone; if this is the wrong broker, "
                    "stop the agent and give it the right --bootstrap",
                    agent_id,
                    store.path,
                    outcome.stale,
                    ", ".join(PROJECTION.topics),
                    outcome.checkpoint.inbox,
                )
            store.save(outcome.checkpoint)
        self.sensor.on_recovered("agent", time.monotonic() - started)
        return recovered

    async def _assign(
        self,
        consumer: AIOKafkaConsumer,
        recovered: Mapping[str, Recovered],
        landed: Sequence[tuple[TopicPartition, int]],
    ) -> None:
        """Read every actor's inbox slot from the earliest position of its actors, control from where recovery's fold
        ended, and the registry from the actors' registrations (all of it from the start when one asks peers: its
        directory of peers is the fold of the whole registry)."""
        starts: dict[TopicPartition, int] = {}
        for agent_id, actor in self._actors.items():
            inbox = TopicPartition(INBOX, _slot(actor))
            self._on_slot.setdefault(inbox, []).append(actor)
            checkpoint = recovered[agent_id].checkpoint
            _earliest(starts, [(inbox, checkpoint.inbox)])
            _earliest(starts, [(tp, offset) for tp, offset in checkpoint.positions.items() if tp.topic == CONTROL])
        registry = await self.partitions(REGISTRY)
        if any(actor.config.ask_peers for actor in self._actors.values()):
            _earliest(starts, (await consumer.beginning_offsets(registry)).items())
        else:
            _earliest(starts, landed)
        consumer.assign(list(starts))
        for tp, offset in starts.items():
            consumer.seek(tp, offset)

    async def _serve(self, consumer: AIOKafkaConsumer) -> None:
        """Read for the actors and serve them until every one has stopped; the first failure stops them all."""
        reader = asyncio.create_task(self._read(consumer))
        resyncs = asyncio.create_task(self._resync_every())
        serving = {asyncio.create_task(actor.serve()) for actor in self._actors.values()}
        failure: BaseException | None = None
        try:
            waiting: set[asyncio.Task[None]] = {reader, *serving}
            while serving & waiting:
                done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    error = task.exception()
                    if task is reader and error is None:
                        error = SwarmlogError(f"host {self.name} stopped reading its agents' partitions")
                    if error is not None and failure is None:
                        failure = error
                        self.stop()
        finally:
            for background in (reader, resyncs):
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background
        if failure is not None:
            raise failure

    async def _read(self, consumer: AIOKafkaConsumer) -> None:
        """Hand every record read to the actors it concerns; pause a slot whose actors are too far behind."""
        while True:
            batch = await consumer.getmany(timeout_ms=100)
            for tp, records in batch.items():
                for record in records:
                    self.sensor.on_consumed(tp.topic)
                    if tp.topic == INBOX:
                        for actor in self._on_slot.get(tp, ()):
                            actor.mailbox.post(record)
                    else:
                        self._notify(record)
            self._pace(consumer, [tp for tp in batch if tp.topic == INBOX])

    def _notify(self, record: ConsumerRecord) -> None:
        """Decode a control or registry record once and post it to the actors it concerns (the streams worker
        dead-letters what does not decode here: see DEAD_LETTERED_BY)."""
        tp = TopicPartition(record.topic, record.partition)
        try:
            event = input_event(self.codec, record, TOPIC_EVENTS[tp.topic], self.trust)
        except DecodeError:
            self.sensor.on_decode_failure(tp.topic)
            return
        if isinstance(event, ResyncRequested) and (event.target == "*" or event.target in self._actors):
            self.resync_now()
        for actor in self._concerned(event):
            actor.mailbox.post(Notice(tp, record.offset, event))

    def _concerned(self, event: Event) -> Iterable[Actor]:
        """The actors a control or registry event is for."""
        match event:
            case DrainRequested(target="*"):
                return self._actors.values()
            case (
                DrainRequested(target=agent_id) | BudgetExceeded(agent_id=agent_id) | BudgetRestored(agent_id=agent_id)
            ):
                return [self._actors[agent_id]] if agent_id in self._actors else []
        if isinstance(event, AgentDeclaredDead) and event.agent_id in self._actors:
            named = self._actors[event.agent_id]
            return [named, *(actor for actor in self._askers if actor is not named)]
        return self._askers if event.name in TOPIC_EVENTS[REGISTRY] else []

    def _pace(self, consumer: AIOKafkaConsumer, posted: Iterable[TopicPartition]) -> None:
        """Pause the slots just posted to where an actor has MAILBOX_LIMIT inbox records waiting; resume paused ones
        once their actors have fewer."""
        for tp in {*posted, *self._paused}:
            full = any(len(actor.mailbox.inbox) >= MAILBOX_LIMIT for actor in self._on_slot.get(tp, ()))
            if full and tp not in self._paused:
                consumer.pause(tp)
                self._paused.add(tp)
            elif not full and tp in self._paused:
                consumer.resume(tp)
                self._paused.discard(tp)

    async def _resync_every(self) -> None:
        """Re-read the ground truth every resync_s, and at once on a ResyncRequested; keep the last on errors."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._resync_now.wait(), self._resync_s)
            self._resync_now.clear()
            try:
                await self._resync()
            except KafkaError as exc:
                log.warning("re-sync of the ground truth by %s failed, keeping the versions held: %s", self.name, exc)

    async def _resync(self) -> None:
        """Bring every ground-truth document the actors work from up to its latest version on its topic."""
        for document, truth in self._truths.items():
            latest = await read_ground_truth(self.settings, self.codec, truth, f"{self.name}-resync")
            if latest.version != truth.version:
                log.info("%s re-synced %s to version %s", self.name, document, latest.version)
            self._truths[document] = latest


def _slot(actor: Actor) -> int:
    """An actor's inbox partition, once placed."""
    if actor.config.slot is None:
        raise RuntimeError(f"agent {actor.config.agent_id} has no slot yet")
    return actor.config.slot


def _earliest(starts: dict[TopicPartition, int], positions: Iterable[tuple[TopicPartition, int]]) -> None:
    """Lower each partition's start to the positions given."""
    for tp, offset in positions:
        starts[tp] = min(offset, starts.get(tp, offset))
