"""The agent process: register, heartbeat, consume its inbox partition and control, think, write, checkpoint."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import itertools
import logging
import uuid
import zlib
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any

from aiokafka import ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from swarmlog.actors.actions import RECALL, REMEMBER, content_limit
from swarmlog.actors.brains import Brain, Generation, open_brain, task_tokens
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
    Vote,
    Work,
    decide,
    declared_dead,
    evolve,
)
from swarmlog.actors.groundtruth import GroundTruth
from swarmlog.actors.peers import Peer, evolve_peers, resolve, targets
from swarmlog.actors.prompts import excerpt
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.actors.shell.host import AgentHost
from swarmlog.actors.shell.mailbox import Mailbox, Notice
from swarmlog.actors.shell.store import Checkpoint
from swarmlog.actors.steps import (
    Run,
    Usage,
    advance,
    ballot_prompt,
    ballot_schema,
    broke_off,
    experience,
    question,
    released,
    reply,
    reply_prompt,
    reply_schema,
    step_taken,
    vote_events,
    wait_ended,
)
from swarmlog.artifacts import ArtifactError
from swarmlog.envelope import now_ms, stamp
from swarmlog.errors import DecodeError, SwarmlogError
from swarmlog.kafka.records import DEAD_LETTERED_BY, TOPIC_EVENTS, input_event, send_dead_letter
from swarmlog.lifecycle import stop_on_signals
from swarmlog.metrics import Sensor, sensor_for
from swarmlog.schemas.artifacts import externalized, parse
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
    TaskCompleted,
    TaskFailed,
    TokensUsed,
    WaitEnded,
    WaitOutcome,
)
from swarmlog.settings import Settings
from swarmlog.topics import DEAD_LETTERS, INBOX, REGISTRY, catalog

RECALLED = 3  # memories in a step's prompt
log = logging.getLogger("swarmlog.agent")


class RejectedCommand(SwarmlogError):
    """An inbox or control record that decodes but is not something this agent can act on."""


class AgentProcess:
    """One agent actor: it takes its inbox records in order, each command's effect (a task, a vote, a reply) in a task
    of its own, up to `concurrency` of them at once, none while throttled, so heartbeats and control flow on. Its host
    (actors/shell/host.py) reads for it and lends it the clients, store and memory."""

    def __init__(self, config: AgentConfig, settings: Settings, brain: Brain, sensor: Sensor | None = None) -> None:
        self._config, self._settings, self._brain = config, settings, brain
        self._max_content = content_limit(config.max_tokens)  # what every action of this agent may say
        self._sensor = sensor or Sensor()
        self._topic_of = {
            name: spec.name for spec in catalog(settings) if "agent" in spec.writers for name in spec.events
        }
        self._name = f"agent:{config.agent_id}"
        self.mailbox = Mailbox()
        self._registration_id = ""  # the event id of this run's AgentRegistered
        self._abandoned: frozenset[AttemptKey] = frozenset()  # tasks of a run declared dead, handed back next step
        self._stopping = asyncio.Event()
        self._unthrottled = asyncio.Event()
        self._effects: dict[int, asyncio.Task[None]] = {}  # inbox offset of a command -> its effect, still running
        self._subjects: dict[int, object] = {}  # inbox offset of a command -> what its running effect is about
        self._handled = 0  # the inbox offset after the last command decided (its effect may still run)
        self._runs: dict[AttemptKey, Run] = {}  # the tasks in progress, by attempt
        self._peers: Mapping[str, Peer] = {}
        self._waits: dict[str, asyncio.Future[PeerAnswered]] = {}  # wait id -> the PeerAnswered it waits on
        self._deferred: collections.deque[ConsumerRecord] = collections.deque()  # inbox records read while full
        self._failed: Exception | None = None  # what broke an effect; the agent stops then, instead of staying BUSY

    @property
    def config(self) -> AgentConfig:
        """Who this agent is and how it runs (its slot is allocated by the time it registers)."""
        return self._config

    @property
    def _slot(self) -> int:
        """This agent's inbox partition (allocated before it registers)."""
        if self._config.slot is None:
            raise RuntimeError(f"agent {self._config.agent_id} has no slot yet: its host places it first")
        return self._config.slot

    def place(self, slot: int) -> None:
        """Take the inbox slot the host found allocated to this agent."""
        self._config = dataclasses.replace(self._config, slot=slot)

    def stop(self) -> None:
        """Begin draining: finish the current step, release an unfinished task, deregister."""
        self._stopping.set()
        self._unthrottled.set()
        self.mailbox.ready.set()

    async def run(self) -> None:
        """Run as a host of one (its store in data_dir/<agent id>) until stop(); recovery first, deregistration last."""
        path = self._config.data_dir / self._config.agent_id
        await AgentHost([self], self._settings, self._name, path, self._sensor).run()

    async def register(self, host: AgentHost, checkpoint: Checkpoint) -> tuple[TopicPartition, int]:
        """Take the host's clients and the recovered checkpoint, and register a new run: the registry partition it
        landed in, and the offset after it."""
        self._host, self._checkpoint = host, checkpoint
        self._codec, self._producer, self._outbox = host.codec, host.producer, host.outbox
        self._trust = host.trust
        self._store, self._memory, self._wait = host.store, host.memory, host.wait
        self._artifacts = host.artifacts
        return await self._register()

    @property
    def _truth(self) -> GroundTruth:
        """The latest version of this agent's ground-truth document that its host has read."""
        return self._host.truth(self._config.ground_truth)

    async def serve(self) -> None:
        """Heartbeat and take what the host posts until stopped; then drain and deregister. An effect that failed
        stops the agent with a SwarmlogError (its host stops the others)."""
        heartbeats = asyncio.create_task(self._heartbeat())
        try:
            self._gate()
            while not self._stopping.is_set():
                await self.mailbox.ready.wait()
                self.mailbox.ready.clear()
                await self._take()
            await self._drain()
            await self._emit([self._stamp(AgentDeregistered, reason="stopped")])
        finally:
            heartbeats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeats
        if self._failed is not None:
            raise SwarmlogError(
                f"agent {self._config.agent_id} stopped because a command's effect failed "
                f"({type(self._failed).__name__}: {self._failed}); start it again: it resumes "
                "from its last checkpoint"
            ) from self._failed

    async def _take(self) -> None:
        """Take every notice, then the records deferred and those of the inbox, in order, while the inbox is open (one
        read for an agent behind this one on a shared slot is skipped). Only this loop decides on inbox records, so
        they are decided in their order and never more effects run than `concurrency`."""
        while self.mailbox.notices:
            notice = self.mailbox.notices.popleft()
            if notice.tp.topic == REGISTRY:
                await self._registry(notice.event)
            else:
                self._control(notice)
        while self._deferred and not self._full() and self._inbox_open() and not self._stopping.is_set():
            await self._command(self._deferred.popleft())
        while self.mailbox.inbox and self._inbox_open() and not self._stopping.is_set():
            record = self.mailbox.inbox.popleft()
            if record.offset < self._checkpoint.inbox:
                continue
            if self._answers(record):
                continue
            if self._full() or self._deferred:
                self._deferred.append(record)
            else:
                await self._command(record)

    def _full(self) -> bool:
        """Whether as many effects run as this agent's concurrency."""
        return len(self._effects) >= self._config.concurrency

    async def _command(self, record: ConsumerRecord) -> None:
        """Decide on one inbox record; effects run in their own task and checkpoint past the record when done."""
        event = await self._decoded(record)
        if event is None:
            return self._handle(record.offset + 1)
        decision = decide(HandleInbox(event, now_ms(), self._truth.version), self._checkpoint.state)
        if isinstance(decision, InboxRejected):
            await self._dead_letter(record, RejectedCommand(decision.reason))
            return self._handle(record.offset + 1)
        await self._write(decision.events)
        if not decision.effects:
            return self._handle(record.offset + 1)
        (effect,) = decision.effects
        subject = _subject(effect)
        if subject in self._subjects.values():  # a command sent again while its first copy's effect still runs
            return self._handle(record.offset + 1)
        if isinstance(effect, Work):
            work = self._work(effect.order)
        elif isinstance(effect, Reply):
            work = self._reply(effect.question)
        else:
            work = self._vote(effect.ballot)
        self._subjects[record.offset] = subject
        self._effects[record.offset] = asyncio.create_task(self._then_checkpoint(work, record.offset))
        self._handled = max(self._handled, record.offset + 1)
        self._gate()

    async def _then_checkpoint(self, work: Awaitable[None], offset: int) -> None:
        """Run the effect of the command at inbox `offset`, then checkpoint as far as no earlier effect still runs, and
        let the serve loop take what was read meanwhile.

        An effect that fails anyway (a bug, a broker gone for longer than the producer retries) stops the agent without
        checkpointing past the command, so that a restart takes it up again; it never leaves the agent BUSY for good
        while its heartbeats say it is alive."""
        try:
            await work
        except Exception as exc:
            log.exception("agent %s: the effect of inbox offset %d failed; stopping", self._config.agent_id, offset)
            self._failed = exc
            self.stop()
            return
        del self._effects[offset], self._subjects[offset]
        self._handle(self._handled)
        self._gate()

    def _handle(self, after: int) -> None:
        """Note the inbox handled up to `after`, and checkpoint up to the first command whose effect still runs (a
        restart reads it again, and the commands after it, which the state then skips or resumes): no offset is
        saved past an effect not done."""
        self._handled = max(self._handled, after)
        self._save(min(self._effects, default=self._handled))

    def _answers(self, record: ConsumerRecord) -> bool:
        """Whether the record is the answer a task waits on from a peer: it ends the wait (a record read again later
        is then an answer nobody waits on)."""
        if not self._waits:
            return False
        try:
            event = input_event(self._codec, record, None, self._trust)
        except DecodeError:
            return False  # dead-lettered when its turn comes
        if isinstance(event, PeerAnswered):
            waiting = self._waits.get(event.question_id)
            if waiting is not None and not waiting.done():
                waiting.set_result(event)
                return True
        return False

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
            slot=self._slot,
            capacity=self._config.concurrency,
        )
        ((landed, after),) = (await self._emit([registered])).items()
        self._registration_id = registered.event_id
        log.info("agent %s registered on slot %d", self._config.agent_id, self._slot)
        return landed, after

    async def _registry(self, event: Event) -> None:
        """Fold a registry event into the peer directory, and register again on a death of this run."""
        self._peers = evolve_peers(self._peers, event)
        if declared_dead(event, self._config.agent_id, self._registration_id):
            await self._reenlist(event)

    async def _reenlist(self, death: AgentDeclaredDead) -> None:
        """Declared dead while running (its heartbeats did not reach the liveness watch in time, e.g. through a broker
        outage on its side): hand back the tasks of the dead run, which the coordinator has reassigned, and register a
        new run, which the registry and the coordinator take as alive (heartbeats of a dead run never revive it)."""
        runs = list(self._runs.values())
        self._abandoned = frozenset(self._runs)
        log.warning(
            "agent %s was declared dead while running (registration %s, no heartbeat seen within %d ms); "
            "%sregistering again",
            self._config.agent_id,
            death.registration_id,
            death.timeout_ms,
            "".join(
                f"handing back task {run.order.task_id} of mission {run.order.mission_id}, reassigned since, and "
                for run in runs
            ),
        )
        await self._register()

    async def _work(self, order: Order) -> None:
        """The step loop: generate, act, until the task closes; between steps obey throttling and stopping.

        The prompt carries the memories nearest to the task, then to the agent's last `recall`; a `remember` step
        also records an ExperienceRecorded with its embedding.
        """
        # The task's max_tokens, else the agent's, bounds each generation and the content an action may say.
        tokens = task_tokens(self._config.brain, self._config.max_tokens, order.max_tokens)
        first = Run(
            order, self._config.agent_id, started_ms=now_ms(), peers=self._targets(), max_content=content_limit(tokens)
        )
        try:
            order = dataclasses.replace(order, inputs=await self._shown(order.inputs))
        except ArtifactError as exc:  # the task cannot be done here: the coordinator hears why
            log.warning("task %s of mission %s: an input cannot be read: %s", order.task_id, order.mission_id, exc)
            await self._write([broke_off(first, "GAVE_UP", f"an input cannot be read: {exc}", now_ms())])
            return
        run: Run | None = dataclasses.replace(first, order=order)
        memories = await self._recall(order.prompt)
        while run is not None:
            self._runs[order.key] = run
            await self._unthrottled.wait()
            reason = self._giving_up(run)
            if reason is not None:
                await self._write([released(run, reason, now_ms())])
                break
            try:
                generation = await self._brain.generate(run.prompt(memories, self._truth), run.schema, tokens)
            except Exception as exc:  # any brain failure closes the task as MODEL_ERROR; the agent goes on
                log.exception("brain failed on %s", order.task_id)
                events: tuple[Event, ...] = (broke_off(run, "MODEL_ERROR", f"{type(exc).__name__}: {exc}", now_ms()),)
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
                self._runs[order.key] = run
                ended, run = await self._ask(run)
                await self._write([ended])
        self._runs.pop(order.key, None)

    def _giving_up(self, run: Run) -> str | None:
        """Why the run is handed back before its next step (the agent stops, or the run was declared dead), or None."""
        if self._stopping.is_set():
            return "agent stopping"
        if run.order.key in self._abandoned:
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
            await self._outbox.deliver(await self._stored(question(run, self._slot, now_ms())), found[1])
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
        """Have the model answer a peer's question (an artifact's excerpt when it is a reference), into the asker's
        inbox slot."""
        try:
            shown = dataclasses.replace(asked, question=await self._readable(asked.question))
            generation = await self._brain.generate(
                reply_prompt(shown, self._max_content), reply_schema(self._max_content), self._config.max_tokens
            )
        except Exception as exc:  # the asker still gets an answer: an error (an unreadable question too), not silence
            log.exception("brain failed on question %s", asked.question_id)
            generation = Generation(f"model error: {type(exc).__name__}: {exc}", 0, 0)
        used, answered = reply(
            asked, self._config.agent_id, generation.text, self._usage(generation), self._max_content
        )
        await self._write([used])
        await self._outbox.deliver(await self._stored(answered), asked.reply_slot)
        self._sensor.on_produced(INBOX)

    async def _recall(self, query: str) -> tuple[str, ...]:
        """The contents of the memories nearest to `query`."""
        return tuple(hit.content for hit in await self._memory.recall(query, RECALLED))

    async def _vote(self, ballot: Ballot) -> None:
        """Have the model choose a candidate, constrained to the ballot's ids; abstain when the model fails or a
        candidate's artifact cannot be read."""
        try:
            ballot = dataclasses.replace(ballot, candidates=await self._shown(ballot.candidates))
        except ArtifactError as exc:
            log.warning("ballot %s: a candidate cannot be read: %s; agent %s abstains", ballot.ballot_id, exc,
                        self._config.agent_id)  # fmt: skip
            return
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
        """What a generation cost and how it sampled, now, under a name of its own (so a retried step's tokens count
        again)."""
        return Usage(
            generation.prompt_tokens,
            generation.completion_tokens,
            now_ms(),
            uuid.uuid4().hex[:12],
            generation.temperature,
            generation.seed,
        )

    def _control(self, notice: Notice) -> None:
        """Budget events throttle and restore this agent, a drain request stops it (the host posts only those meant
        for it, and re-syncs itself). Its position is saved with the next checkpoint."""
        if notice.offset < self._checkpoint.positions.get(notice.tp, 0):
            return  # folded by recovery already
        position = {notice.tp: notice.offset + 1}
        self._checkpoint = dataclasses.replace(self._checkpoint, positions={**self._checkpoint.positions, **position})
        match notice.event:
            case DrainRequested():
                self.stop()
            case BudgetExceeded() | BudgetRestored():
                self._checkpoint = dataclasses.replace(
                    self._checkpoint, state=evolve(self._checkpoint.state, notice.event)
                )
                self._save(self._checkpoint.inbox)
                self._gate()

    async def _drain(self) -> None:
        """Let the in-flight tasks finish their steps (or release them); give up on stuck steps after drain_s."""
        effects = list(self._effects.values())
        if not effects:
            return
        _, stuck = await asyncio.wait(effects, timeout=self._config.drain_s)
        if not stuck:
            return
        for effect in stuck:
            effect.cancel()
        for run in list(self._runs.values()):
            if run.order.key not in self._checkpoint.state.closed:
                ended = (
                    [wait_ended(run, "CANCELLED", None, "this agent is stopping", now_ms())[0]] if run.waiting else []
                )
                await self._write([*ended, released(run, f"step not done within {self._config.drain_s} s", now_ms())])

    async def _heartbeat(self) -> None:
        """AgentHeartbeat of the current run every heartbeat_s on a fixed schedule (no drift), whatever the agent is
        doing; one the broker does not take within the producer's timeout is given up (the wait logs it)."""
        loop = asyncio.get_running_loop()
        start = loop.time()
        for sequence in itertools.count():
            run = next(iter(self._runs.values()), None)  # the oldest task in progress
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
                            slot=self._slot,
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
        return "BUSY" if self._effects else "IDLE"

    def _inbox_open(self) -> bool:
        """Whether to take inbox records: while an effect can start (fewer running than `concurrency`, not throttled,
        not stopping), or while a task waits on a peer (its answer arrives there; other records wait their turn)."""
        throttled = self._checkpoint.state.throttled
        return bool(self._waits) or not (self._full() or throttled or self._stopping.is_set())

    def _gate(self) -> None:
        """Let the step loop run unless throttled, and look at the inbox again when it is open."""
        if self._checkpoint.state.throttled and not self._stopping.is_set():
            self._unthrottled.clear()
        else:
            self._unthrottled.set()
        if (self.mailbox.inbox or (self._deferred and not self._full())) and self._inbox_open():
            self.mailbox.ready.set()

    async def _shown(self, texts: Mapping[str, str]) -> dict[str, str]:
        """Texts as a prompt shows them (`_readable`)."""
        return {name: await self._readable(text) for name, text in texts.items()}

    async def _readable(self, text: str) -> str:
        """A text as a prompt shows it: a reference becomes an excerpt of its artifact (ArtifactError when it cannot
        be read)."""
        ref = parse(text)
        if ref is None:
            return text
        data = await asyncio.to_thread(self._artifacts.get, ref)
        return excerpt(text, data.decode(errors="replace"))

    async def _stored(self, event: E) -> E:
        """The event with each text too large for it replaced by its artifact's reference, the artifacts stored
        first."""
        event, artifacts = externalized(event, self._settings.inline_output_bytes)
        for data in artifacts.values():
            await asyncio.to_thread(self._artifacts.put, data)
        return event

    async def _write(self, events: tuple[Event, ...] | list[Event]) -> None:
        """Write events (a text too large for one as an artifact's reference), then fold them into the state (the
        checkpoint is saved later, after the effects)."""
        events = [await self._stored(event) for event in events]
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
            return input_event(self._codec, record, TOPIC_EVENTS[record.topic], self._trust)
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
        """Dead-letter a record this agent cannot use, with its coordinates and the reason (one WARNING).

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


def _subject(effect: Work | Reply | Vote) -> object:
    """What an effect is about (a task attempt, a question, a ballot): two effects about one never run at once, so a
    command sent again while its first copy runs (a coordinator re-sending its assignments) is not done twice."""
    match effect:
        case Work(order=order):
            return order.key
        case Reply(question=question):
            return ("question", question.question_id)
        case Vote(ballot=ballot):
            return ("ballot", ballot.ballot_id)


async def run_agent(config: AgentConfig, settings: Settings) -> None:
    """Run one agent until SIGTERM or SIGINT, then drain it; metrics on settings.metrics_port unless 0."""
    await run_agents([config], settings, f"agent:{config.agent_id}", config.data_dir / config.agent_id)


async def run_agents(configs: Sequence[AgentConfig], settings: Settings, name: str, store_path: Path) -> None:
    """Run agents on one host until SIGTERM or SIGINT, then drain them; metrics on settings.metrics_port unless 0."""
    sensor, server = sensor_for(settings.metrics_port)
    # Each agent samples with its own seed, so replicas of a task are independent draws, not copies.
    brains = [open_brain(c.brain, c.model, c.gpu, seed=zlib.crc32(c.agent_id.encode())) for c in configs]
    try:
        agents = [AgentProcess(c, settings, brain, sensor) for c, brain in zip(configs, brains, strict=True)]
        host = AgentHost(agents, settings, name, store_path, sensor)
        # Past the step's drain time, a stop still waits on the broker for the release and the deregistration.
        stop_on_signals(host.stop, what=name, deadline_s=max(c.drain_s for c in configs) + 20.0)
        await host.run()
    finally:
        for brain in brains:
            brain.close()
        if server is not None:
            server.close()
