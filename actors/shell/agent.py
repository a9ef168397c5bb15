"""The agent process: register, heartbeat, consume its inbox partition and control, think, write, checkpoint."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import time
import uuid
import zlib
from collections.abc import Awaitable, Mapping
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from swarmlog.actors.actions import MAX_ACTION_TOKENS, RECALL, REMEMBER
from swarmlog.actors.brains import Brain, Generation, open_brain
from swarmlog.actors.domain import (
    PROJECTION,
    AttemptKey,
    Ballot,
    E,
    HandleInbox,
    InboxRejected,
    Order,
    Question,
    Reply,
    Work,
    decide,
    declared_dead,
    evolve,
)
from swarmlog.actors.groundtruth import DEFAULT_DOCUMENT, GroundTruth
from swarmlog.actors.memory.semantic import SemanticMemory
from swarmlog.actors.peers import Peer, evolve_peers, resolve, targets
from swarmlog.actors.shell.outbox import Outbox
from swarmlog.actors.shell.recovery import recover
from swarmlog.actors.shell.resync import read_ground_truth
from swarmlog.actors.shell.store import AgentStore
from swarmlog.actors.steps import (
    Run,
    Usage,
    advance,
    ballot_prompt,
    ballot_schema,
    experience,
    model_error,
    question,
    released,
    reply,
    reply_prompt,
    reply_schema,
    step_taken,
    vote_events,
    wait_ended,
)
from swarmlog.envelope import now_ms, stamp
from swarmlog.errors import ConfigError, DecodeError, SwarmlogError
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import cluster_id
from swarmlog.kafka.records import DEAD_LETTERED_BY, TOPIC_EVENTS, input_event, send_dead_letter
from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.lifecycle import stop_on_signals
from swarmlog.metrics import Sensor, sensor_for
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDeregistered,
    AgentHeartbeat,
    AgentRegistered,
    AgentStatus,
    BudgetExceeded,
    BudgetRestored,
    DrainRequested,
    ExperienceRecorded,
    PeerAnswered,
    ResyncRequested,
    TaskCompleted,
    TaskFailed,
    TokensUsed,
    WaitEnded,
    WaitOutcome,
)
from swarmlog.settings import Settings
from swarmlog.topics import CONTROL, DEAD_LETTERS, INBOX, REGISTRY, catalog

RECALLED = 3  # memories in a step's prompt
log = logging.getLogger("swarmlog.agent")


class RejectedCommand(SwarmlogError):
    """An inbox or control record that decodes but is not something this agent can act on."""


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Who this agent is and how it runs."""

    agent_id: str
    capabilities: tuple[str, ...]
    brain: str
    model: str | None
    gpu: int | None
    node: str
    region: str
    slot: int
    data_dir: Path
    heartbeat_s: float = 1.0
    drain_s: float = 10.0
    max_tokens: int = MAX_ACTION_TOKENS
    ask_peers: bool = False
    ask_timeout_s: float = 60.0
    ground_truth: str = DEFAULT_DOCUMENT
    resync_s: float = 60.0


class AgentProcess:
    """One agent: its inbox partition paused while it thinks or is throttled, so heartbeats and control flow on."""

    def __init__(self, config: AgentConfig, settings: Settings, brain: Brain, sensor: Sensor | None = None) -> None:
        self._config, self._settings, self._brain = config, settings, brain
        self._sensor = sensor or Sensor()
        self._topic_of = {
            name: spec.name for spec in catalog(settings) if "agent" in spec.writers for name in spec.events
        }
        self._codec = codec_for(settings.schema_registry_url)
        self._inbox = TopicPartition(INBOX, config.slot)
        self._name = f"agent:{config.agent_id}"
        self._wait = BrokerWait(self._sensor, settings.bootstrap or "", f"take the events of {self._name}")
        self._registration_id = ""  # the event id of this run's AgentRegistered
        self._abandoned: AttemptKey | None = None  # the task of a run declared dead, handed back before its next step
        self._stopping = asyncio.Event()
        self._unthrottled = asyncio.Event()
        self._busy: asyncio.Task[None] | None = None
        self._run: Run | None = None
        self._peers: Mapping[str, Peer] = {}
        self._truth = GroundTruth(config.ground_truth)
        self._resync_now = asyncio.Event()
        self._waits: dict[str, asyncio.Future[PeerAnswered]] = {}  # wait id -> the PeerAnswered it waits on
        self._deferred: collections.deque[ConsumerRecord] = collections.deque()  # inbox records read while busy
        self._failed: Exception | None = None  # what broke an effect; the agent stops then, instead of staying BUSY

    def stop(self) -> None:
        """Begin draining: finish the current step, release an unfinished task, deregister."""
        self._stopping.set()
        self._unthrottled.set()

    async def run(self) -> None:
        """Run until stop(); recovery first, deregistration last."""
        store = AgentStore(self._config.data_dir / self._config.agent_id)
        consumer = AIOKafkaConsumer(
            bootstrap_servers=self._settings.bootstrap,
            client_id=self._name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
        )
        memory = SemanticMemory(self._settings.redis_url, self._settings.memory_flush_ms)
        try:
            async with EventProducer(self._settings, client_id=self._name) as producer, memory:
                await consumer.start()
                self._producer, self._outbox, self._store = (
                    producer,
                    Outbox(producer, self._settings, self._wait),
                    store,
                )
                self._memory = memory
                folded = [tp for topic in PROJECTION.topics for tp in await self._partitions(topic)]
                await self._check_slot()
                started = time.monotonic()
                self._checkpoint, stale = await recover(
                    consumer,
                    self._codec,
                    self._config.agent_id,
                    self._inbox,
                    folded,
                    store.load(self._config.agent_id),
                    await cluster_id(consumer),
                )
                if stale is not None:
                    log.warning(
                        "agent %s: the checkpoint in %s is stale: %s; rebuilt from the log instead (%s, and "
                        "inbox %d, from the log start). Nothing is lost or redone; if this is the wrong broker, "
                        "stop the agent and give it the right --bootstrap",
                        self._config.agent_id,
                        store.path,
                        stale,
                        ", ".join(PROJECTION.topics),
                        self._checkpoint.inbox,
                    )
                self._sensor.on_recovered("agent", time.monotonic() - started)
                store.save(self._checkpoint)
                registry = await self._partitions(REGISTRY) if self._config.ask_peers else []
                await self._serve(consumer, [tp for tp in folded if tp.topic == CONTROL], registry)
                if self._failed is not None:
                    raise SwarmlogError(
                        f"agent {self._config.agent_id} stopped because a command's effect failed "
                        f"({type(self._failed).__name__}: {self._failed}); start it again: it resumes "
                        "from its last checkpoint"
                    ) from self._failed
        finally:
            await consumer.stop()
            store.close()

    async def _check_slot(self) -> None:
        """A ConfigError when the agent's slot is not a partition of the inbox topic (it would wait on it forever)."""
        count = len(await self._partitions(INBOX))
        if self._inbox.partition >= count:
            raise ConfigError(
                f"agent {self._config.agent_id}: slot {self._inbox.partition} is not a partition of "
                f"{INBOX}, which has {count} (slots 0-{count - 1}); give the agent a slot below "
                f"{count}, or create the topics with more inbox partitions (SWARMLOG_INBOX_PARTITIONS)"
            )

    async def _partitions(self, topic: str) -> list[TopicPartition]:
        """Every partition of a topic (the producer waits for its metadata)."""
        return [TopicPartition(topic, p) for p in sorted(await self._producer.raw.partitions_for(topic))]

    async def _serve(
        self, consumer: AIOKafkaConsumer, control: list[TopicPartition], registry: list[TopicPartition]
    ) -> None:
        """Register, heartbeat and handle records until stopped; then drain and deregister.

        The registry is read for a death of this run: from the registration on, in the partition it landed in (where
        its death is written too, under the same key); when asking peers, all of it from the beginning."""
        await self._resync()  # before registering, so the first task already sees the current ground truth
        own, registered_at = await self._register()
        consumer.assign([self._inbox, *control, *(registry or [own])])
        consumer.seek(self._inbox, self._checkpoint.inbox)
        if registry:
            await consumer.seek_to_beginning(*registry)  # the peer directory is the fold of the whole registry
        else:
            consumer.seek(own, registered_at)
        for tp in control:  # where recovery's fold ended: no control event after it is missed, none before is obeyed
            consumer.seek(tp, self._checkpoint.positions[tp])
        self._consumer = consumer
        self._gate()
        heartbeats = asyncio.create_task(self._heartbeat())
        resyncs = asyncio.create_task(self._resync_every())
        try:
            while not self._stopping.is_set():
                batch = await consumer.getmany(timeout_ms=100, max_records=1)
                for tp, records in batch.items():
                    for record in records:
                        self._sensor.on_consumed(tp.topic)
                        if tp.topic == REGISTRY:
                            await self._registry(record)
                        elif tp.topic == CONTROL:
                            await self._control(record)
                        elif self._busy is not None:
                            self._while_busy(record)
                        else:
                            await self._command(record)
            await self._drain()
            await self._emit([self._stamp(AgentDeregistered, reason="stopped")])
        finally:
            for background in (heartbeats, resyncs):
                background.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await background

    async def _command(self, record: ConsumerRecord) -> None:
        """Decide on one inbox record; effects run in their own task and checkpoint past the record when done."""
        event = await self._decoded(record)
        if event is None:
            return self._save(record.offset + 1)
        decision = decide(HandleInbox(event, now_ms(), self._truth.version), self._checkpoint.state)
        if isinstance(decision, InboxRejected):
            await self._dead_letter(record, RejectedCommand(decision.reason))
            return self._save(record.offset + 1)
        await self._write(decision.events)
        if not decision.effects:
            return self._save(record.offset + 1)
        (effect,) = decision.effects
        if isinstance(effect, Work):
            work = self._work(effect.order)
        elif isinstance(effect, Reply):
            work = self._reply(effect.question)
        else:
            work = self._vote(effect.ballot)
        self._busy = asyncio.create_task(self._then_checkpoint(work, record.offset + 1))
        self._gate()

    async def _then_checkpoint(self, work: Awaitable[None], next_offset: int) -> None:
        """Run an effect, then checkpoint past its command, handle what was read meanwhile, and take the next one.

        An effect that fails anyway (a bug, a broker gone for longer than the producer retries) stops the agent without
        checkpointing past the command, so that a restart takes it up again; it never leaves the agent BUSY for good
        while its heartbeats say it is alive."""
        try:
            await work
        except Exception as exc:
            log.exception(
                "agent %s: the effect of inbox offset %d failed; stopping", self._config.agent_id, next_offset - 1
            )
            self._failed, self._busy = exc, None
            self.stop()
            return
        self._save(next_offset)
        self._busy = None
        while self._deferred and self._busy is None:
            await self._command(self._deferred.popleft())
        self._gate()

    def _while_busy(self, record: ConsumerRecord) -> None:
        """An inbox record read while a task waits on a peer: its answer ends the wait, anything else waits its turn."""
        try:
            event = self._codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
        except DecodeError:
            event = None  # dead-lettered when its turn comes
        if isinstance(event, PeerAnswered):
            waiting = self._waits.get(event.question_id)
            if waiting is not None and not waiting.done():
                waiting.set_result(event)
                return
        self._deferred.append(record)

    async def _register(self) -> tuple[TopicPartition, int]:
        """Register a new run of this agent (the AgentRegistered's id names it); the registry partition it landed in,
        and the offset after it."""
        registered = self._stamp(
            AgentRegistered,
            capabilities=list(self._config.capabilities),
            model=self._brain.model,
            brain=self._config.brain,
            node=self._config.node,
            gpu=self._config.gpu,
            region=self._config.region,
            slot=self._config.slot,
        )
        ((landed, after),) = (await self._emit([registered])).items()
        self._registration_id = registered.event_id
        log.info("agent %s registered on slot %d", self._config.agent_id, self._config.slot)
        return landed, after

    async def _registry(self, record: ConsumerRecord) -> None:
        """Fold a registry record into the peer directory, and register again on a death of this run; skip a record
        it cannot decode.

        Only a component that consumes a topic for its effects writes that topic's dead letters: the registry's is
        the streams worker (DEAD_LETTERED_BY). The agent reads the registry for a directory of peers, from the
        beginning at every start, so dead-lettering here would write each bad record again at every start of every
        agent that asks peers."""
        try:
            event = self._codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
        except DecodeError:
            self._sensor.on_decode_failure(record.topic)
            return
        self._peers = evolve_peers(self._peers, event)
        if declared_dead(event, self._config.agent_id, self._registration_id):
            await self._reenlist(event)

    async def _reenlist(self, death: AgentDeclaredDead) -> None:
        """Declared dead while running (its heartbeats did not reach the liveness watch in time, e.g. through a broker
        outage on its side): hand back the task of the dead run, which the coordinator has reassigned, and register a
        new run, which the registry and the coordinator take as alive (heartbeats of a dead run never revive it)."""
        run = self._run
        self._abandoned = run.order.key if run is not None else None
        log.warning(
            "agent %s was declared dead while running (registration %s, no heartbeat seen within %d ms); "
            "%sregistering again",
            self._config.agent_id,
            death.registration_id,
            death.timeout_ms,
            ""
            if run is None
            else f"handing back task {run.order.task_id} of mission {run.order.mission_id}, reassigned since, and ",
        )
        await self._register()

    async def _work(self, order: Order) -> None:
        """The step loop: generate, act, until the task closes; between steps obey throttling and stopping.

        The prompt carries the memories nearest to the task, then to the agent's last `recall`; a `remember` step
        also records an ExperienceRecorded with its embedding.
        """
        run: Run | None = Run(order, self._config.agent_id, started_ms=now_ms(), peers=self._targets())
        memories = await self._recall(order.prompt)
        while run is not None:
            self._run = run
            await self._unthrottled.wait()
            reason = self._giving_up(run)
            if reason is not None:
                await self._write([released(run, reason, now_ms())])
                break
            try:
                generation = await self._brain.generate(
                    run.prompt(memories, self._truth), run.schema, self._config.max_tokens
                )
            except Exception as exc:  # any brain failure closes the task as MODEL_ERROR; the agent goes on
                log.exception("brain failed on %s", order.task_id)
                events: tuple[Event, ...] = (model_error(run, f"{type(exc).__name__}: {exc}", now_ms()),)
                run = None
            else:
                events, run = advance(run, generation.text, self._usage(generation))
            step = step_taken(events)
            if step is not None and step.action.lower() == REMEMBER:
                embedding = await self._memory.embed(step.content)
                events = (*events, experience(step, embedding, self._config.node, self._settings.memory_ttl_s))
            await self._write(events)
            if step is not None and step.action.lower() == RECALL:
                memories = await self._recall(step.content)
            if run is not None and run.waiting is not None:
                self._run = run
                ended, run = await self._ask(run)
                await self._write([ended])
        self._run = None

    def _giving_up(self, run: Run) -> str | None:
        """Why the run is handed back before its next step (the agent stops, or the run was declared dead), or None."""
        if self._stopping.is_set():
            return "agent stopping"
        if run.order.key == self._abandoned:
            return "declared dead while running; the coordinator has reassigned the task"
        return None

    def _targets(self) -> tuple[str, ...]:
        """Who a task may ask: nobody unless asking peers is enabled."""
        if not self._config.ask_peers:
            return ()
        return targets(self._peers, self._config.agent_id, self._config.region)

    async def _ask(self, run: Run) -> tuple[WaitEnded, Run]:
        """Put the run's question to its peer and wait for the answer, a stop, or the timeout: WaitEnded, next run."""
        assert run.waiting is not None
        wait, found = run.waiting, resolve(self._peers, self._config.agent_id, self._config.region, run.waiting.target)
        if found is None:
            return wait_ended(run, "CANCELLED", None, f"no agent {wait.target!r} in {self._config.region}", now_ms())
        answer: asyncio.Future[PeerAnswered] = asyncio.get_running_loop().create_future()
        self._waits[wait.wait_id] = answer
        stopping: asyncio.Future[Any] = asyncio.ensure_future(self._stopping.wait())
        try:
            await self._outbox.deliver(question(run, self._config.slot, now_ms()), found[1])
            self._sensor.on_produced(INBOX)
            self._gate()  # read the inbox while waiting: the answer arrives there
            await asyncio.wait(
                [answer, stopping], timeout=self._config.ask_timeout_s, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopping.cancel()
            del self._waits[wait.wait_id]
            self._gate()
        if answer.done():
            answered = answer.result()
            by_peer = answered.producer.startswith("agent:")  # else the abort of a broken deadlock
            outcome: WaitOutcome = "ANSWERED" if by_peer else "ABORTED"
            return wait_ended(run, outcome, answered.answer, answered.error, now_ms())
        if self._stopping.is_set():
            return wait_ended(run, "CANCELLED", None, "this agent is stopping", now_ms())
        return wait_ended(run, "TIMED_OUT", None, f"no answer within {self._config.ask_timeout_s} s", now_ms())

    async def _reply(self, asked: Question) -> None:
        """Have the model answer a peer's question, into the asker's inbox slot."""
        try:
            generation = await self._brain.generate(reply_prompt(asked), reply_schema(), self._config.max_tokens)
        except Exception as exc:  # the asker still gets an answer: an error, so it does not wait in vain
            log.exception("brain failed on question %s", asked.question_id)
            generation = Generation(f"model error: {type(exc).__name__}: {exc}", 0, 0)
        used, answered = reply(asked, self._config.agent_id, generation.text, self._usage(generation))
        await self._write([used])
        await self._outbox.deliver(answered, asked.reply_slot)
        self._sensor.on_produced(INBOX)

    async def _recall(self, query: str) -> tuple[str, ...]:
        """The contents of the memories nearest to `query`."""
        return tuple(hit.content for hit in await self._memory.recall(query, RECALLED))

    async def _vote(self, ballot: Ballot) -> None:
        """Have the model choose a candidate, constrained to the ballot's ids; abstain when the model fails."""
        try:
            generation = await self._brain.generate(
                ballot_prompt(ballot), ballot_schema(ballot), self._config.max_tokens
            )
        except Exception:  # as with malformed output: no VoteCast; the ballot closes on the votes that came
            log.exception("brain failed on ballot %s; agent %s abstains", ballot.ballot_id, self._config.agent_id)
            return
        await self._write(vote_events(ballot, self._config.agent_id, generation.text, self._usage(generation)))

    @staticmethod
    def _usage(generation: Generation) -> Usage:
        """What a generation cost, now, under a name of its own (so a retried step's tokens count again)."""
        return Usage(generation.prompt_tokens, generation.completion_tokens, now_ms(), uuid.uuid4().hex[:12])

    async def _control(self, record: ConsumerRecord) -> None:
        """Budget events throttle and restore this agent; a drain request stops it; anything else is skipped (and
        dead-lettered when it is meant for this agent). Its position is saved with the next checkpoint."""
        position = {TopicPartition(record.topic, record.partition): record.offset + 1}
        self._checkpoint = dataclasses.replace(self._checkpoint, positions={**self._checkpoint.positions, **position})
        event = await self._decoded(record)
        if event is None:
            return
        me = self._config.agent_id
        match event:
            case DrainRequested(target=target) if target in (me, "*"):
                self.stop()
            case ResyncRequested(target=target) if target in (me, "*"):
                self._resync_now.set()
            case BudgetExceeded(agent_id=agent_id) | BudgetRestored(agent_id=agent_id) if agent_id == me:
                self._checkpoint = dataclasses.replace(self._checkpoint, state=evolve(self._checkpoint.state, event))
                self._save(self._checkpoint.inbox)
                self._gate()

    async def _drain(self) -> None:
        """Let the in-flight task finish its step (or release it); give up on a stuck step after drain_s."""
        if self._busy is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self._busy), self._config.drain_s)
        except TimeoutError:
            self._busy.cancel()
            run = self._run
            if run is not None and run.order.key not in self._checkpoint.state.closed:
                ended = (
                    [wait_ended(run, "CANCELLED", None, "this agent is stopping", now_ms())[0]] if run.waiting else []
                )
                await self._write([*ended, released(run, f"step not done within {self._config.drain_s} s", now_ms())])

    async def _resync_every(self) -> None:
        """Re-read the ground truth every resync_s, and at once on a ResyncRequested; keep the last on errors."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._resync_now.wait(), self._config.resync_s)
            self._resync_now.clear()
            try:
                await self._resync()
            except KafkaError as exc:
                log.warning(
                    "re-sync of %s failed, keeping version %s: %s", self._truth.document_id, self._truth.version, exc
                )

    async def _resync(self) -> None:
        """Bring the ground-truth document up to the latest version on its topic."""
        before = self._truth.version
        self._truth = await read_ground_truth(self._settings, self._codec, self._truth, f"{self._name}-resync")
        if self._truth.version != before:
            log.info(
                "agent %s re-synced %s to version %s",
                self._config.agent_id,
                self._truth.document_id,
                self._truth.version,
            )

    async def _heartbeat(self) -> None:
        """AgentHeartbeat of the current run every heartbeat_s on a fixed schedule (no drift), whatever the agent is
        doing; one the broker does not take within the producer's timeout is given up (the wait logs it)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        for sequence in itertools.count():
            run = self._run
            with contextlib.suppress(KafkaError):
                await self._emit(
                    [
                        self._stamp(
                            AgentHeartbeat,
                            registration_id=self._registration_id,
                            sequence=sequence,
                            status=self._status(),
                            in_flight_task=run.order.task_id if run else None,
                            region=self._config.region,
                            slot=self._config.slot,
                        )
                    ]
                )
            await asyncio.sleep(max(0.0, start + (sequence + 1) * self._config.heartbeat_s - loop.time()))

    def _status(self) -> AgentStatus:
        """DRAINING, THROTTLED, BUSY or IDLE, in that precedence."""
        if self._stopping.is_set():
            return "DRAINING"
        if self._checkpoint.state.throttled:
            return "THROTTLED"
        return "BUSY" if self._busy else "IDLE"

    def _gate(self) -> None:
        """Read the inbox while idle (nothing deferred, not throttled, not stopping) or while a task waits on a peer."""
        throttled = self._checkpoint.state.throttled
        if throttled and not self._stopping.is_set():
            self._unthrottled.clear()
        else:
            self._unthrottled.set()
        if self._waits or not (self._busy or self._deferred or throttled or self._stopping.is_set()):
            self._consumer.resume(self._inbox)
        else:
            self._consumer.pause(self._inbox)

    async def _write(self, events: tuple[Event, ...] | list[Event]) -> None:
        """Write events, then fold them into the state (the checkpoint is saved later, after the effects)."""
        written = await self._emit(events)
        state = self._checkpoint.state
        for event in events:
            state = evolve(state, event)
            if isinstance(event, ExperienceRecorded):
                self._memory.remember(event)
        folded = {tp: offset for tp, offset in written.items() if tp.topic in PROJECTION.topics}
        self._checkpoint = dataclasses.replace(
            self._checkpoint, state=state, positions={**self._checkpoint.positions, **folded}
        )

    async def _emit(self, events: tuple[Event, ...] | list[Event]) -> dict[TopicPartition, int]:
        """Write events through the outbox and tell the sensor: topics, tokens, finished tasks."""
        written = await self._outbox.write(events)
        for event in events:
            self._sensor.on_produced(self._topic_of[event.name])
            match event:
                case TokensUsed():
                    self._sensor.on_tokens(self._config.agent_id, "prompt", event.prompt_tokens)
                    self._sensor.on_tokens(self._config.agent_id, "completion", event.completion_tokens)
                case TaskCompleted() | TaskFailed():
                    self._sensor.on_task_finished(event.latency_ms / 1000)
        return written

    async def _decoded(self, record: ConsumerRecord) -> Event | None:
        """The record's event when it decodes to a kind its topic carries; else None, after dead-lettering it when
        that is this agent's to do (its inbox's records meant for it: see DEAD_LETTERED_BY and `_mine`)."""
        try:
            return input_event(self._codec, record, TOPIC_EVENTS[record.topic])
        except DecodeError as error:
            self._sensor.on_decode_failure(record.topic)
            if DEAD_LETTERED_BY.get(record.topic) == "agent" and self._mine(record):
                await self._dead_letter(record, error)
            return None

    def _mine(self, record: ConsumerRecord) -> bool:
        """Whether a record this agent cannot use is its to dead-letter: keyed to it, to every agent, or not keyed.

        Inbox and control records are keyed by their addressee, so one keyed to another agent (sharing the slot, or
        reading the same control partition) is that agent's to dead-letter: each bad record is written once, not once
        per reader."""
        return record.key in (None, b"*", self._config.agent_id.encode())

    async def _dead_letter(self, record: ConsumerRecord, error: Exception) -> None:
        """Write a record this agent cannot use to the dead-letter topic, with its coordinates and the reason (one WARNING).

        The dead letter's id derives from the record's coordinates, so a record read again (after kill -9 before the
        checkpoint, or when a rebuilt agent reads its inbox from the log start) is written as the same dead letter,
        which readers dedupe by event id."""
        await self._wait.through(
            send_dead_letter(
                self._producer, record, error, self._name, max_message_bytes=self._settings.max_message_bytes
            )
        )
        self._sensor.on_produced(DEAD_LETTERS)

    def _save(self, inbox: int) -> None:
        """Checkpoint the state, the inbox position and the positions in the projection's topics in one store write."""
        self._checkpoint = dataclasses.replace(self._checkpoint, inbox=inbox)
        self._store.save(self._checkpoint)

    def _stamp(self, event_class: type[E], **fields: Any) -> E:
        """A fresh event from this agent (registry and heartbeat facts, not caused by a command)."""
        return stamp(event_class, producer=self._name, agent_id=self._config.agent_id, **fields)


async def run_agent(config: AgentConfig, settings: Settings) -> None:
    """Run one agent until SIGTERM or SIGINT, then drain it; metrics on settings.metrics_port unless 0."""
    sensor, server = sensor_for(settings.metrics_port)
    # Each agent samples with its own seed, so replicas of a task are independent draws, not copies.
    brain = open_brain(config.brain, config.model, config.gpu, seed=zlib.crc32(config.agent_id.encode()))
    try:
        agent = AgentProcess(config, settings, brain, sensor)
        # Past the step's drain time, a stop still waits on the broker for the release and the deregistration.
        stop_on_signals(agent.stop, what=f"agent {config.agent_id}", deadline_s=config.drain_s + 20.0)
        await agent.run()
    finally:
        brain.close()
        if server is not None:
            server.close()
