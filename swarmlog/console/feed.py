"""The console's live view: one group-less Kafka reader folding the log into `view.ConsoleView`, and a version per
page section so each browser stream sends what changed.

The reader starts each topic from its beginning (token usage from RECENT_MS ago: a budget counts its current window
only; heartbeats from their end: each agent's next one, within its interval, says all a heartbeat says) and folds every record into a fresh view; the view is shown once the reader has
caught up, then kept live. Records that do not decode are counted and passed over: the console writes nothing, dead
letters included. While the broker is away the reader waits (aiokafka reconnects) and goes on where it was; an error
that stops it is logged, and the view is rebuilt from the log a moment later; the browsers see every section anew.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.console import view
from swarmlog.console.view import ConsoleView, Located
from swarmlog.envelope import now_ms
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import idempotence_supported
from swarmlog.kafka.reading import reader
from swarmlog.kafka.records import TOPIC_EVENTS, input_event
from swarmlog.lifecycle import Running
from swarmlog.schemas.codec import codec_for
from swarmlog.settings import Settings
from swarmlog.topics import (
    ALERTS,
    CONTROL,
    DEAD_LETTERS,
    HEARTBEATS,
    JOURNAL,
    MISSIONS,
    REGISTRY,
    TASK_EVENTS,
    USAGE,
    VOTES,
    WAITS,
)

log = logging.getLogger("swarmlog.console")

FROM_BEGINNING = (REGISTRY, MISSIONS, JOURNAL, TASK_EVENTS, VOTES, WAITS, ALERTS, CONTROL, DEAD_LETTERS)
FROM_RECENT = (USAGE,)
"""Read from RECENT_MS ago: a budget counts the current window only (a minute by default)."""
FROM_END = (HEARTBEATS,)
TOPICS = (*FROM_BEGINNING, *FROM_RECENT, *FROM_END)
RECENT_MS = 600_000
POLL_MS = 200
MAX_RECORDS = 5000
RETRY_S = 1.0


class Feed(Running):
    """The folded view of the log, kept live by a background task; `version` rises with every change, and
    `since(section)` says at which version a section last changed."""

    def __init__(self, settings: Settings, *, clock: Callable[[], int] = now_ms, retry_s: float = RETRY_S) -> None:
        self.settings = settings
        self.clock = clock
        self.view: ConsoleView = view.INITIAL
        self.state = "connecting"
        self.undecodable = 0
        self.version = 0
        self.wake = asyncio.Event()
        self._changed: dict[str, int] = {}
        self._reset = 0
        self._retry_s = retry_s
        self._codec = codec_for(settings.schema_registry_url)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Start reading the log in the background; a second start is a mistake."""
        if self._task is not None:
            raise RuntimeError("the console's feed is already started")
        self._task = asyncio.create_task(self._run(), name="swarmlog-console-feed")

    async def stop(self) -> None:
        """Stop reading (idempotent)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    def since(self, section: str) -> int:
        """The version at which `section` last changed (every section changes when the view is rebuilt)."""
        return max(self._changed.get(section, 0), self._reset)

    def status(self) -> dict[str, Any]:
        """The feed's own state, shown in the page's header."""
        return {
            "state": self.state,
            "events": self.view.events,
            "undecodable": self.undecodable,
            "bootstrap": self.settings.bootstrap,
            "regions": list(self.settings.region_names),
        }

    def _publish(self, sections: Iterable[str]) -> None:
        """Mark sections changed at a new version and wake the streams waiting for one."""
        self.version += 1
        for section in sections:
            self._changed[section] = self.version
        self.wake.set()
        self.wake = asyncio.Event()

    def _set_state(self, state: str) -> None:
        """A new feed state, published when it differs."""
        if state != self.state:
            self.state = state
            self._publish(("status",))

    async def _run(self) -> None:
        """Follow the log; whatever stops it, rebuild the view from the log again after `retry_s`."""
        while True:
            try:
                await self._follow()
            except Exception as exc:  # a broker gone or a topic deleted: the view is rebuilt, nothing is lost
                log.warning("lost the log at %s (%s); reading it again", self.settings.bootstrap, exc)
            self._set_state("reconnecting")
            await asyncio.sleep(self._retry_s)

    async def _follow(self) -> None:
        """Read the topics into a fresh view: catch up to their ends, then stay live."""
        consumer = reader(self.settings, "swarmlog-console", idempotence_supported(self.settings))
        await consumer.start()
        try:
            partitions = await self._partitions(consumer)
            consumer.assign(partitions)
            beginning = [tp for tp in partitions if tp.topic in FROM_BEGINNING]
            recent = [tp for tp in partitions if tp.topic in FROM_RECENT]
            await consumer.seek_to_beginning(*beginning)
            await consumer.seek_to_end(*[tp for tp in partitions if tp.topic in FROM_END], *recent)
            since = await consumer.offsets_for_times({tp: self.clock() - RECENT_MS for tp in recent})
            for tp, found in since.items():
                if found is not None:  # else nothing that recent: from the end
                    consumer.seek(tp, found.offset)
            ends = await consumer.end_offsets([*beginning, *recent])
            self.view, self.undecodable = view.INITIAL, 0
            self._set_state("catching up")
            while True:
                batches = await consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_RECORDS)
                touched = self._fold(record for records in batches.values() for record in records)
                if self.state != "live":
                    if batches and not await _reached(consumer, ends):
                        continue
                    self._reset = self.version + 1  # every section is new to every browser
                    self.state = "live"
                    touched.add("status")
                if touched:
                    self._publish(touched)
        finally:
            await consumer.stop()

    def _fold(self, records: Iterable[Any]) -> set[str]:
        """Fold consumed records into the view (one batch); the sections they changed."""
        touched: set[str] = set()
        items = []
        for record in records:
            try:
                event = input_event(self._codec, record, TOPIC_EVENTS[record.topic])
            except DecodeError as exc:
                self.undecodable += 1
                log.debug("passed over %s", exc)
                continue
            item = Located(record.topic, record.partition, record.offset, record.timestamp, event)
            items.append(item)
            touched |= view.sections(item)
        self.view = view.fold(self.view, items)
        return touched

    async def _partitions(self, consumer: AIOKafkaConsumer) -> list[TopicPartition]:
        """Every partition of the console's topics, once they all exist (waiting for `swarmlog topics ensure`)."""
        while True:
            cluster = await consumer._client.fetch_all_metadata()  # the public topics() keeps no partitions
            absent = [topic for topic in TOPICS if cluster.partitions_for_topic(topic) is None]
            if not absent:
                return [
                    TopicPartition(topic, partition)
                    for topic in TOPICS
                    for partition in sorted(cluster.partitions_for_topic(topic))
                ]
            self._set_state(f"waiting for topics: {', '.join(absent)} (swarmlog topics ensure)")
            await asyncio.sleep(self._retry_s)


async def _reached(consumer: AIOKafkaConsumer, ends: dict[TopicPartition, int]) -> bool:
    """Whether the consumer has read every partition up to the end it had when the reading began."""
    for tp, end in ends.items():
        if await consumer.position(tp) < end:
            return False
    return True
