"""TopService: the top level on Kafka (`swarmlog top`): recover from swarm.top.journal, then decide on missions for
the region `top` and on the ends of their sub-missions in the regions' journals.

Delivery, journal first (on both brokers): per poll, each decision's journal events as one record batch (all or
none), then the sub-missions they place (MissionSubmitted to swarm.missions), then the inputs' offsets (committed in the
background, as a region's coordinator does). A crash before the journal write leaves no trace; after it, the
redelivered input finds its events in the fold (their ids derive from the input's id) and decides nothing.
Sub-missions whose write a crash cut off are re-sent at start: every share running is submitted again, and a region
takes a mission id once, so a repeat is harmless.

Inputs: swarm.missions (from the start when the group has no position yet) and every partition of the regions'
journal (from their end the first time: no sub-mission of this top level can end before it submitted one; that
position is committed at once). The regions' announcements (swarm.coordinators) are read on a consumer of their own,
so a backlog of inputs never makes a region look silent; they are no fact of the journal, but every decision taken on
them (a split's regions, a move) is.

Following a top mission: its decisions are on swarm.top.journal (key: the mission id), ending with its
MissionCompleted, MissionFailed or MissionRejected; `swarmlog replay state top` shows the fold, and each share's own
progress is in its region's journal under the sub-mission id (`swarmlog watch <mission>/<share> --region <region>`).
One `swarmlog top` serves a cluster: it announces itself on swarm.coordinators as the region `top`, and holds it as a
regional coordinator holds its region (coordinator/shell/announce.py): a second one does not start beside it, and one
paused past its lease checks before its next write that no other took over meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from asyncio import Future
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from swarmlog.coordinator import top
from swarmlog.coordinator.announcements import Announcement
from swarmlog.coordinator.announcements import evolve as announced
from swarmlog.coordinator.placement import TOP
from swarmlog.coordinator.shell.announce import Announcer, read_announcements, wait_until_unserved
from swarmlog.envelope import now_ms
from swarmlog.errors import DecodeError, EncodeError, ServiceError, SwarmlogError
from swarmlog.kafka.commits import BackgroundCommits, offsets_after
from swarmlog.kafka.connection import client_options
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.lifecycle import Running, start_in
from swarmlog.metrics import Sensor
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import MissionSubmitted
from swarmlog.settings import Settings
from swarmlog.topics import COORDINATORS, JOURNAL, MISSIONS, TOP_JOURNAL, spec_for

TICK_MS = 250
NAME = "swarmlog-top"
log = logging.getLogger("swarmlog.top")


class TopJournalUnreadable(SwarmlogError):
    """The top's journal holds a record that does not decode: the top level will not guess what it decided."""


class TopService(Running):
    """The top level: `async with TopService(settings):` runs it until the block ends."""

    def __init__(self, settings: Settings, config: top.Config | None = None, *, recovery_timeout_s: float = 120.0):
        config = config or top.Config()
        self._settings, self._recovery_timeout_s = settings, recovery_timeout_s
        self._transactional = idempotence_supported(settings)  # read the regions' journals committed only
        self._codec = codec_for(settings.schema_registry_url)
        self._stack = contextlib.AsyncExitStack()
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._regions: Mapping[str, Announcement] = {}
        self.state = top.PROJECTION.initial(config)
        self._clock = 0  # the journal's latest event time: time never goes back, and tick ids are never reused
        self._last_bucket = 0

    async def start(self) -> None:
        """Fold the journal to its end, read the regions' announcements, re-send the running shares, then consume."""
        if self._tasks:
            raise RuntimeError(f"{NAME} was already started; make a new TopService")
        try:
            gone = await wait_until_unserved(self._settings, TOP)
            self._producer = await start_in(
                self._stack,
                EventProducer(self._settings, client_id=NAME, max_batch_size=self._settings.max_message_bytes),
            )
            await self._recover()
            wait = BrokerWait(Sensor(), self._settings.bootstrap or "", "take the top level's announcements")
            self._announcer = Announcer(
                self._settings, TOP, lambda: top.figures(self.state), wait, producer=top.PRODUCER
            )
            await self._announcer.start(gone)  # before anything is sent: a top level that claimed first wins
            self._stack.push_async_callback(self._announcer.stop)
            self._regions = await read_announcements(self._settings)
            announcements = await start_in(self._stack, reader(self._settings, f"{NAME}-regions", False))
            tp = TopicPartition(COORDINATORS, 0)
            announcements.assign([tp])
            await announcements.seek_to_end(tp)
            inputs = await start_in(self._stack, self._inputs())
            await self._position(inputs)
            await self._submit(top.pending(self.state))
        except BaseException:
            await self._stack.aclose()
            raise
        self._tasks = [
            asyncio.create_task(self._follow(announcements), name=f"{NAME}-regions"),
            asyncio.create_task(self._run(inputs), name=NAME),
        ]

    async def stop(self) -> None:
        """Finish the poll in progress, commit it, and disconnect; safe to call twice."""
        self._stopping.set()
        try:
            if self._tasks:
                await asyncio.wait([self._tasks[1]])
                self._tasks[0].cancel()
                await asyncio.gather(self._tasks[0], return_exceptions=True)
        finally:
            await self._stack.aclose()
        failure = self._tasks[1].exception() if self._tasks else None
        if failure is not None:
            raise failure

    async def wait(self, stop: asyncio.Event) -> None:
        """Return once `stop` is set; raise whatever made the loop fail before that."""
        stopped = asyncio.create_task(stop.wait())
        await asyncio.wait([stopped, *self._tasks], return_when=asyncio.FIRST_COMPLETED)
        stopped.cancel()
        for task in self._tasks:
            if task.done():
                task.result()

    async def _recover(self) -> None:
        """The state: the fold of the whole journal (it holds a few events per mission)."""
        consumer = reader(self._settings, f"{NAME}-recovery", False)
        await consumer.start()
        tp = TopicPartition(TOP_JOURNAL, 0)
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            async with asyncio.timeout(self._recovery_timeout_s):
                async for record in records_to_end(consumer, tp):
                    try:
                        event = self._codec.decode_record(record.value or b"", TOP_JOURNAL, 0, record.offset)
                    except DecodeError as error:
                        raise TopJournalUnreadable(
                            f"{TOP_JOURNAL}[0]@{record.offset} does not decode ({error.reason}); the top level stops "
                            "rather than guess what it decided. If a newer swarmlog wrote it, run that version"
                        ) from None
                    self.state = top.PROJECTION.evolve(self.state, event)
                    self._clock = max(self._clock, event.occurred_at)
        except TimeoutError:
            raise ServiceError(
                f"recovery of {TOP_JOURNAL} took over {self._recovery_timeout_s} s; is the broker healthy?"
            ) from None
        finally:
            await consumer.stop()
        self._last_bucket = self._clock // TICK_MS
        log.info("%s recovered %d missions, %d shares running", NAME, len(self.state.missions), len(self.state.running))

    def _inputs(self) -> AIOKafkaConsumer:
        """The input consumer over every partition of swarm.missions and of the regions' journal (no group joins)."""
        consumer = AIOKafkaConsumer(
            **client_options(self._settings),
            group_id=NAME,
            client_id=NAME,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            isolation_level="read_committed" if self._transactional else "read_uncommitted",
        )
        consumer.assign(
            [
                TopicPartition(topic, index)
                for topic in (MISSIONS, JOURNAL)
                for index in range(spec_for(self._settings, topic).partitions)
            ]
        )
        return consumer

    async def _position(self, inputs: AIOKafkaConsumer) -> None:
        """The regions' journal partitions this group never read start at their end, committed at once."""
        fresh = [tp for tp in inputs.assignment() if tp.topic == JOURNAL and await inputs.committed(tp) is None]
        if fresh:
            ends = await inputs.end_offsets(fresh)
            for tp in fresh:
                inputs.seek(tp, ends[tp])
            await inputs.commit({tp: ends[tp] for tp in fresh})

    async def _follow(self, announcements: AIOKafkaConsumer) -> None:
        """Keep the regions' latest announcements current."""
        while True:
            for batch in (await announcements.getmany(timeout_ms=1_000)).values():
                for record in batch:
                    with contextlib.suppress(DecodeError):
                        event = self._codec.decode_record(record.value or b"", COORDINATORS, 0, record.offset)
                        self._regions = announced(self._regions, event)

    async def _run(self, inputs: AIOKafkaConsumer) -> None:
        """Decide on each poll's records and on ticks until stopped."""
        commits = BackgroundCommits(inputs)
        try:
            while not self._stopping.is_set():
                self._announcer.check()  # another top level took over while this one was paused
                polled = await inputs.getmany(timeout_ms=TICK_MS)
                records = [record for batch in polled.values() for record in batch]
                decisions = [decision for record in records if (decision := self._decide(record)) is not None]
                await self._write(decisions)
                if records:
                    commits.note(offsets_after(records))
                await self._tick()
        finally:
            await commits.settle()  # the last polls' offsets, before the consumer closes

    def _decide(self, record: ConsumerRecord) -> top.Decision | None:
        """The decision on one input record (folded into the state), or None when it changes nothing."""
        try:
            event = self._codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
        except DecodeError:
            return (
                None  # the coordinators dead-letter swarm.missions; a region's journal is its coordinator's to repair
            )
        self._clock = max(now_ms(), self._clock)
        command = top.Receive(event, self._clock, self._regions)
        decision = top.decide(command, self.state)
        if decision.events and not self._fits(decision.events):
            reason = (
                f"its decision ({len(decision.events)} events) does not fit one record batch of the top journal "
                f"({self._settings.max_message_bytes} bytes): split it into smaller missions, or raise "
                "SWARMLOG_MAX_MESSAGE_BYTES and the top journal's max.message.bytes"
            )
            log.error("%s refused %s %s: %s", NAME, event.name, event.event_id, reason)
            decision = top.refuse(command, self.state, reason) or decision
        return self._decided(decision)

    def _fits(self, events: tuple[Event, ...]) -> bool:
        """Whether a decision's events fit one record batch of the top journal."""
        return self._batch(events) is not None

    def _decided(self, decision: top.Decision) -> top.Decision | None:
        """Take a decision's state as the current one; None when it has no events."""
        if decision.state is None:
            return None
        self.state = decision.state
        return decision

    async def _tick(self) -> None:
        """Decide a Tick once per new 250 ms bucket, after the journal's clock."""
        wall = now_ms()
        if wall // TICK_MS <= self._last_bucket:
            return
        self._last_bucket = wall // TICK_MS
        self._clock = max(wall, self._clock)
        decision = self._decided(
            top.decide(top.Tick(self._clock, f"top-tick:{self._last_bucket}", self._regions), self.state)
        )
        if decision is not None:
            await self._write([decision])

    async def _write(self, decisions: list[top.Decision]) -> None:
        """Journal each decision as one record batch, then submit the sub-missions they place."""
        if not decisions:
            return
        await self._announcer.hold()  # never a write after another top level took over
        written = [await self._journal(decision.events) for decision in decisions]
        await asyncio.gather(*written)
        for decision in decisions:
            for event in decision.events:
                log.info("%s %s %s", NAME, event.name, _summary(event))
        await self._submit(
            [
                sent
                for decision in decisions
                if decision.state
                for sent in top.submissions(decision.events, decision.state)
            ]
        )

    async def _journal(self, events: tuple[Event, ...]) -> Future[Any]:
        """One record batch of a decision's events on the top's journal; the future of its write."""
        batch = self._batch(events)
        if batch is None:
            raise EncodeError(
                f"the decision of {events[0].causation_id} does not fit one record batch; raise "
                "SWARMLOG_MAX_MESSAGE_BYTES and the top journal's max.message.bytes"
            )
        written: Future[Any] = await self._producer.raw.send_batch(batch, TOP_JOURNAL, partition=0)
        return written

    def _batch(self, events: tuple[Event, ...]) -> Any:
        """A record batch holding a decision's events, or None when they do not fit one."""
        batch = self._producer.raw.create_batch()
        for event in events:
            try:
                value = self._producer.encode_for(TOP_JOURNAL, event)
            except EncodeError:  # the event alone is over the limit
                return None
            key = (event.correlation_id or "").encode()
            headers = self._producer.headers_for(TOP_JOURNAL, key, value)
            if batch.append(key=key, value=value, timestamp=None, headers=headers) is None:
                return None
        return batch if batch.size() <= self._settings.max_message_bytes else None  # a first record always goes in

    async def _submit(self, submissions: list[MissionSubmitted]) -> None:
        """Write sub-missions to swarm.missions and wait until the broker has them all."""
        sent = []
        for event in submissions:
            value, key = self._producer.encode_for(MISSIONS, event), event.mission_id.encode()
            headers = self._producer.headers_for(MISSIONS, key, value)
            sent.append(await self._producer.raw.send(MISSIONS, value, key=key, headers=headers))
        await asyncio.gather(*sent)


def _summary(event: Event) -> str:
    """A log line's worth of a journal event."""
    fields = ("mission_id", "share_id", "region", "from_region", "attempt", "success", "reason")
    return " ".join(f"{name}={value}" for name in fields if (value := getattr(event, name, None)) is not None)
