"""CoordinatorService: one region's coordinator on Kafka: recover from its journal, then decide on every input.

Delivery, journal first, on both brokers (no transactions; the producer is idempotent on Apache Kafka): the records
of each poll are decided one after another, and then written in this order: their journal events as one write (each
decision whole in one record batch, every record naming the write in a header), then their inbox messages (sent
together, then awaited), then the inputs' offsets (committed in the background, one commit in flight, while the next
poll is read: a group commit costs several produce round trips, and nothing waits on it). Nothing reaches an agent that
the journal lacks. A crash before the journal write leaves no trace; after it, the inputs read again (those of the
polls whose commit had not landed) find their events in the fold (their ids derive from the input's id) and decide
nothing, and recovery re-sends the inbox messages of the journal's last write, the only one whose messages may be
missing. Agents may thus see an inbox message twice and must dedupe by event id and by (task, replica, attempt); no
attempt runs twice. On Kafka readers use read_committed: journals of earlier versions
(and repairs) are transactions, and one left open by a crash is aborted at start (`_abort_transactions_left_open`).
Nothing on the broker fences a second live coordinator of the region; the announcements do: one does not start while
another announces that it serves it, of two started at once the first to announce serves it, and a write waits for
the writer to know it still holds the region (`announce.Announcer.hold`): a coordinator paused past its lease checks
the log, and stops when another took the region over meanwhile.

Ticks: at most one per 250 ms bucket, id tick:<region>:<bucket>, always after the journal's clock, so a tick never
reuses the event ids of one written before a crash. Time never goes back: now = max(wall clock, journal clock).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from swarmlog import topics
from swarmlog.coordinator import (
    PROJECTION,
    Config,
    Decision,
    Receive,
    Rejected,
    State,
    Tick,
    decide,
    decide_unrouted,
    refuse,
)
from swarmlog.coordinator.announcements import figures
from swarmlog.coordinator.decide import INPUTS
from swarmlog.coordinator.inbox import messages
from swarmlog.coordinator.shell import folded as snapshots
from swarmlog.coordinator.shell.announce import Announcer, wait_until_unserved
from swarmlog.coordinator.shell.delivery import Delivery
from swarmlog.coordinator.shell.folded import FoldedJournal
from swarmlog.coordinator.shell.recovery import JOURNAL, recover
from swarmlog.coordinator.state import RETAIN_ENDED_MS, RETAIN_GOODBYE_SLOT_MS, RETAIN_SLOT_MS, START_TIMEOUT_MS
from swarmlog.envelope import now_ms
from swarmlog.errors import ConfigError, SwarmlogError
from swarmlog.kafka.commits import offsets_after
from swarmlog.kafka.connection import client_options
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader
from swarmlog.kafka.records import (
    DEAD_LETTERED_BY,
    TOPIC_EVENTS,
    decode_or_dead_letter,
    send_dead_letter,
)
from swarmlog.kafka.signing import trust_for
from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.lifecycle import Running, start_in
from swarmlog.metrics import Sensor
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import TaskAssigned, TaskReassigned
from swarmlog.settings import Settings
from swarmlog.topics import spec_for

TICK_MS = 250
LAG_EVERY_S = 1.0
SNAPSHOT_EVERY_EVENTS = 1_000
SNAPSHOT_EVERY_S = 60.0
SNAPSHOT_APART_S = 2.0
"""At most one snapshot per this many seconds: pickling the state takes tens of ms (about 30 at 500 agents and 3,000
tasks, more than folding 1,000 events takes again), so under thousands of journal events a second a snapshot per 1,000
took a sixth of the coordinator's time. A restart then folds at most the last 2 s of journal besides."""
INBOX_EVERY_S = 30.0
"""How often the coordinator looks whether the inbox has grown (`swarmlog topics ensure --grow-inbox`)."""
log = logging.getLogger("swarmlog.coordinator")
INPUT_TOPICS = (
    topics.MISSIONS,
    topics.TASK_EVENTS,
    topics.VOTES,
    topics.REGISTRY,
    topics.CONTROL,
    topics.ALERTS,
    topics.SLOTS,
)


class InputRejected(SwarmlogError):
    """An input the coordinator's core rejected; it goes to the dead-letter topic with the reason."""


class CoordinatorService(Running):
    """One region's coordinator: `async with CoordinatorService(settings, region):` runs it until the block ends."""

    def __init__(
        self,
        settings: Settings,
        region: str,
        *,
        data_dir: Path | None = None,
        recovery_timeout_s: float = 120.0,
        sensor: Sensor | None = None,
        snapshot_every_events: int = SNAPSHOT_EVERY_EVENTS,
        snapshot_every_s: float = SNAPSHOT_EVERY_S,
        start_timeout_ms: int = START_TIMEOUT_MS,
        retain_ended_ms: int = RETAIN_ENDED_MS,
        retain_slot_ms: int = RETAIN_SLOT_MS,
        retain_goodbye_slot_ms: int = RETAIN_GOODBYE_SLOT_MS,
        inbox_every_s: float = INBOX_EVERY_S,
    ) -> None:
        if region not in settings.region_names:
            raise ConfigError(
                f"unknown region {region!r}; SWARMLOG_REGIONS={settings.regions} gives "
                f"{', '.join(settings.region_names)}"
            )
        self._settings = settings
        self._region = region
        # the config's, once start counts the inbox
        self._timeouts = (start_timeout_ms, retain_ended_ms, retain_slot_ms, retain_goodbye_slot_ms)
        self._snapshot_dir = (data_dir or settings.cache_dir / "coordinator") / region
        self._recovery_timeout_s = recovery_timeout_s
        self._name = f"swarmlog-coordinator-{region}"
        self._committed_reads = idempotence_supported(settings)  # Kafka: read_committed (repairs are transactions)
        self._codec = codec_for(settings.schema_registry_url)
        self._trust = trust_for(settings)
        self._stack = contextlib.AsyncExitStack()
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._last_bucket = 0
        self._sensor = sensor or Sensor()
        self._lag_at = 0.0
        self._inbox_every_s, self._inbox_at = inbox_every_s, time.monotonic()
        self._snapshot_every = (snapshot_every_events, snapshot_every_s)
        self._snapshotted = (-1, 0.0)  # the journal offset of the last snapshot, and when it was taken
        self._inputs_since_ms = 0  # since when the inputs have been read (see Tick), unless a broker wait ended later
        self._broker = BrokerWait(self._sensor, settings.bootstrap or "", "take the coordinator's announcements")

    @property
    def folded(self) -> FoldedJournal:
        """The journal as this coordinator has folded it (recovered, plus everything it wrote since)."""
        return self._folded

    @property
    def config(self) -> Config:
        """The config the coordinator decides with: its folded state's (set at start, grown with the inbox)."""
        return self._folded.state.config

    async def start(self) -> None:
        """Recover from the journal (and snapshot), re-send the last write's messages, then consume."""
        if self._task is not None:
            raise RuntimeError(f"{self._name} was already started; make a new CoordinatorService")
        settings, partition = self._settings, self._settings.region_names.index(self._region)
        try:
            gone = await wait_until_unserved(settings, self._region)
            if self._committed_reads:
                await self._abort_transactions_left_open()
            self._producer = await start_in(
                self._stack,
                EventProducer(
                    settings,
                    client_id=self._name,
                    max_batch_size=settings.max_message_bytes,
                ),
            )
            journal = await start_in(self._stack, reader(settings, f"{self._name}-recovery", self._committed_reads))
            inbox = await self._producer.raw.partitions_for(topics.INBOX)  # slots are allocated from these
            config = Config(
                self._region,
                settings.region_names,
                *self._timeouts,
                inbox_partitions=len(inbox),
                max_routed_bytes=settings.max_message_bytes // 2,
            )
            empty = PROJECTION.initial(config)
            started = time.monotonic()
            self._folded = await recover(
                journal, self._codec, partition, empty, snapshots.load(self._snapshot_dir), self._recovery_timeout_s
            )
            self._sensor.on_recovered("coordinator", time.monotonic() - started)
            log.info(
                "%s recovered the journal to offset %d in %.2f s",
                self._name,
                self._folded.offset,
                time.monotonic() - started,
            )
            self._sensor.on_queue_depth(self._region, len(self._folded.state.queue))
            snapshots.save(self._snapshot_dir, self._folded)
            self._snapshotted = (self._folded.offset, time.monotonic())
            self._last_bucket = self._folded.clock // TICK_MS
            inputs = await start_in(self._stack, self._inputs())
            self._inputs_since_ms = now_ms()
            self._delivery = Delivery(
                self._producer,
                inputs,
                region=self._region,
                partition=partition,
                max_batch_bytes=settings.max_message_bytes,
            )
            self._announcer = Announcer(settings, self._region, lambda: figures(self._folded.state), self._broker)
            # before anything is sent: of coordinators that claim the region, the one the log holds first wins
            await self._announcer.start(gone)
            self._stack.push_async_callback(self._announcer.stop)  # first to go: the region is unserved before we stop
            await self._delivery.inbox(messages(self._folded.last, self._folded.state))
        except BaseException:
            await self._stack.aclose()
            raise
        self._task = asyncio.create_task(self._run(inputs), name=self._name)

    async def stop(self) -> None:
        """Finish the unit of work in progress, commit it, snapshot, and disconnect; safe to call twice."""
        self._stopping.set()
        try:
            if self._task is not None:
                await asyncio.wait([self._task])
                if self._task.exception() is None:
                    snapshots.save(self._snapshot_dir, self._folded)
        finally:
            await self._stack.aclose()
        failure = self._task.exception() if self._task is not None else None
        if failure is not None:
            raise failure  # a loop that died must not look like a clean stop

    async def wait(self, stop: asyncio.Event) -> None:
        """Return once `stop` is set; raise whatever made the coordinator's loop fail before that."""
        assert self._task is not None, "start the service first"
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, self._task], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        if self._task.done():
            self._task.result()

    async def _abort_transactions_left_open(self) -> None:
        """Start and stop a producer with the transactional id this coordinator's journal was once written with
        (swarmlog-coordinator-<region>): a transaction that an earlier version left open when it died is aborted now,
        not after the broker's transaction timeout, so read_committed readers of the journal are not held back."""
        fence = EventProducer(self._settings, client_id=f"{self._name}-fence", transactional_id=self._name)
        await fence.start()
        await fence.stop()

    def _inputs(self) -> AIOKafkaConsumer:
        """The input consumer; every partition is assigned (no group joins, so a restart does not wait on one)."""
        consumer = AIOKafkaConsumer(
            **client_options(self._settings),
            group_id=self._name,
            client_id=self._name,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            isolation_level="read_committed" if self._committed_reads else "read_uncommitted",
        )
        consumer.assign(
            [
                TopicPartition(topic, index)
                for topic in INPUT_TOPICS
                for index in range(spec_for(self._settings, topic).partitions)
            ]
        )
        return consumer

    async def _run(self, inputs: AIOKafkaConsumer) -> None:
        """Decide on each poll's input records, write what they decided as one write, and on ticks, until stopped."""
        try:
            while not self._stopping.is_set():
                self._announcer.check()  # another coordinator took the region over while this one was paused
                polled = await inputs.getmany(timeout_ms=TICK_MS)
                records = [record for batch in polled.values() for record in batch]  # each partition in offset order
                if records:
                    await self._write(await self._decide(records))
                    self._delivery.ack(offsets_after(records))
                await self._tick()
                await self._report_lag(inputs)
                await self._follow_the_inbox()
                await self._snapshot_if_due()
        finally:
            await self._delivery.settle()  # the last polls' offsets, before the consumer closes

    async def _decide(self, records: list[ConsumerRecord]) -> list[Decision]:
        """Decide on a poll's records one after another, each on the state its predecessors' decisions led to."""
        decisions: list[Decision] = []
        state, clock = self._folded.state, self._folded.clock
        for record in records:
            event = await self._input(record)
            if event is None:
                continue
            clock = max(now_ms(), clock)
            command = Receive(event, clock)
            decision = decide(command, state)
            if isinstance(decision, Decision) and decision.events:
                decision = self._fitted(command, state, decision, decisions[0].events[0] if decisions else None)
            if isinstance(decision, Rejected):
                await self._reject(record, decision)
            elif decision.state is not None:
                decisions.append(decision)
                state = decision.state
        return decisions

    def _fitted(self, command: Receive, state: State, decision: Decision, first: Event | None) -> Decision | Rejected:
        """The decision when it fits one journal record batch of its write (the one whose first event is `first`, or
        a new one); else the same decision without its routing, which the next ticks do, when that fits; else the
        refusal of its input (a mission too large is rejected, any other input dead-lettered, with the sizes)."""
        misfit = self._misfit(decision, first)
        if misfit is None:
            return decision
        unrouted = decide_unrouted(command, state)
        if isinstance(unrouted, Decision) and unrouted.events and self._misfit(unrouted, first) is None:
            log.info(
                "%s left %s %s's routing to its ticks: %s",
                self._name,
                command.event.name,
                command.event.event_id,
                misfit,
            )
            return unrouted
        reason = (
            f"{misfit}: split it into smaller missions (or submit it to the top level, which splits it across "
            "regions), or raise SWARMLOG_MAX_MESSAGE_BYTES and the journal's max.message.bytes"
        )
        log.error("%s refused %s %s: %s", self._name, command.event.name, command.event.event_id, reason)
        return refuse(command, state, reason)

    def _misfit(self, decision: Decision, first: Event | None) -> str | None:
        """None when the decision fits one record batch of its write, else why not."""
        return self._delivery.misfit(decision.events, (first or decision.events[0]).event_id)

    async def _input(self, record: ConsumerRecord) -> Event | None:
        """One input record's event, or None when it is not the coordinator's to decide on. One it cannot use
        (undecodable, or of a kind its topic does not carry) is skipped, and dead-lettered when it is this coordinator's
        to dead-letter (`_dead_letters`). Either way it counts as read: its offset is committed with its poll's."""
        self._sensor.on_consumed(record.topic)
        event = await decode_or_dead_letter(
            self._codec,
            self._producer,
            record,
            self._name,
            carries=TOPIC_EVENTS[record.topic],
            trust=self._trust,
            max_message_bytes=self._settings.max_message_bytes,
            dead_letters=self._dead_letters(record),
        )
        if event is None:
            self._sensor.on_decode_failure(record.topic)
            if self._dead_letters(record):
                self._sensor.on_produced(topics.DEAD_LETTERS)
            return None
        if not isinstance(event, INPUTS):
            return None  # carried by its topic for someone else (an agent's control events)
        return event

    async def _reject(self, record: ConsumerRecord, rejected: Rejected) -> None:
        """Dead-letter an input the core rejected, with the reason."""
        await send_dead_letter(
            self._producer,
            record,
            InputRejected(rejected.reason),
            self._name,
            max_message_bytes=self._settings.max_message_bytes,
        )
        self._sensor.on_produced(topics.DEAD_LETTERS)

    def _dead_letters(self, record: ConsumerRecord) -> bool:
        """Whether an unusable record is this coordinator's to dead-letter: when its topic's dead letters are the
        coordinators' (DEAD_LETTERED_BY: not the registry's or control's, which the streams worker writes). Every
        coordinator reads every partition and writes the same dead letter (its id derives from the coordinates), so
        there is one by id however many regions run, and one as long as any runs."""
        return DEAD_LETTERED_BY.get(record.topic) == "coordinator"

    async def _tick(self) -> None:
        """Decide a Tick once per new 250 ms bucket; write what it emits in a unit of its own."""
        wall = now_ms()
        if wall // TICK_MS <= self._last_bucket:
            return
        self._last_bucket = wall // TICK_MS
        since = max(self._inputs_since_ms, self._broker.resumed_ms)
        if self._broker.waiting_since_ms is not None:
            since = wall  # the broker is away now: no start can be read, so no silence counts
        decision = decide(
            Tick(max(wall, self._folded.clock), f"tick:{self._region}:{self._last_bucket}", since), self._folded.state
        )
        if isinstance(decision, Decision) and decision.events:
            await self._write([decision])

    async def _write(self, decisions: list[Decision]) -> None:
        """Journal the decisions' events as one write (named by its first event), fold them, then send their inbox
        messages all at once and await them together."""
        if not decisions:
            return
        events = [event for decision in decisions for event in decision.events]
        write = events[0].event_id
        await self._announcer.hold()  # never a write after another took the region over
        offsets = await self._delivery.journal(write, [decision.events for decision in decisions])
        last = decisions[-1].state
        assert last is not None, "a decision with events carries the state after them"
        self._folded = self._folded.written(write, events, offsets, last)
        outgoing = [m for decision in decisions if decision.state for m in messages(decision.events, decision.state)]
        await self._delivery.inbox(outgoing)
        log.debug(
            "%s wrote %s at %d..%d; sent %s",
            self._name,
            [e.name for e in events],
            offsets[0],
            offsets[-1],
            [(m.event.name, m.agent_id, m.slot) for m in outgoing],
        )
        self._report(events, len(outgoing))

    def _report(self, events: list[Event], sent: int) -> None:
        """Tell the sensor what written decisions did: journal events, inbox messages, assignments, the queue."""
        self._sensor.on_produced(JOURNAL, len(events))
        self._sensor.on_produced(topics.INBOX, sent)
        assigned = sum(1 for event in events if isinstance(event, TaskAssigned | TaskReassigned))
        if assigned:
            self._sensor.on_assigned(self._region, assigned)
        self._sensor.on_queue_depth(self._region, len(self._folded.state.queue))

    async def _follow_the_inbox(self) -> None:
        """Every inbox_every_s: when the inbox has more partitions than the region allocates slots from, allocate from
        them all from now on (a restart would too: the partitions are counted at start). Each allocation records the
        count it was made with, so the journal, not this, is what replay reads."""
        if time.monotonic() - self._inbox_at < self._inbox_every_s:
            return
        self._inbox_at = time.monotonic()
        try:
            await self._producer.raw.client.force_metadata_update()
        except KafkaError as exc:  # looked at again next time
            log.debug("%s could not refresh the inbox's partitions: %s", self._name, exc)
            return
        count = len(await self._producer.raw.partitions_for(topics.INBOX))
        if count <= self.config.inbox_partitions:
            return
        log.info("%s: the inbox has grown to %d partitions; slots are allocated from them", self._name, count)
        state = dataclasses.replace(self._folded.state, config=dataclasses.replace(self.config, inbox_partitions=count))
        self._folded = dataclasses.replace(self._folded, state=state)

    async def _snapshot_if_due(self) -> None:
        """Snapshot the fold when `snapshot_due` (written between units of work: everything folded is committed), so a
        restart folds a short tail."""
        folded, (offset, at), (every_events, every_s) = self._folded, self._snapshotted, self._snapshot_every
        if not snapshot_due(folded.offset - offset, time.monotonic() - at, every_events, every_s):
            return
        await asyncio.to_thread(snapshots.save, self._snapshot_dir, folded)  # immutable: safe to pickle off the loop
        self._snapshotted = (folded.offset, time.monotonic())

    async def _report_lag(self, inputs: AIOKafkaConsumer) -> None:
        """At most once a second: how far the inputs' positions are behind their high-water marks, per topic."""
        if time.monotonic() - self._lag_at < LAG_EVERY_S:
            return
        self._lag_at = time.monotonic()
        lag: dict[str, int] = {}
        for tp in inputs.assignment():
            highwater = inputs.highwater(tp)
            if highwater is not None:
                lag[tp.topic] = lag.get(tp.topic, 0) + max(0, highwater - await inputs.position(tp))
        for topic, behind in lag.items():
            self._sensor.on_lag(topic, behind)


def snapshot_due(new_offsets: int, elapsed_s: float, every_events: int, every_s: float) -> bool:
    """Whether to snapshot, `new_offsets` journal offsets and `elapsed_s` seconds after the last snapshot: after
    `every_events` offsets (but not within SNAPSHOT_APART_S of the last), or after `every_s` with any."""
    if new_offsets <= 0:
        return False
    return elapsed_s >= every_s or (new_offsets >= every_events and elapsed_s >= SNAPSHOT_APART_S)
