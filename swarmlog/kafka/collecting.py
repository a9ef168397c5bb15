"""Collecting topics' events in the background while a block runs: how benches and live tests watch a swarm."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from aiokafka import ConsumerRecord, TopicPartition

from swarmlog.envelope import now_ms
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import POLL_MS, reader
from swarmlog.schemas.codec import Codec, codec_for
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings

Start = Literal["beginning", "end"]
CLIENT_ID = "swarmlog-collector"
E = TypeVar("E", bound=Event)


class Collector:
    """The events of every partition of some topics that `keep` accepts, from their beginning or end, while open."""

    def __init__(
        self,
        settings: Settings,
        *topics: str,
        start: Start = "beginning",
        keep: Callable[[Event], bool] = lambda event: True,
        **options: Any,
    ) -> None:
        self.events: list[Event] = []
        self.read_ms: dict[str, int] = {}  # event id → wall-clock ms it was first read at
        self._settings, self._topics, self._start, self._keep, self._options = settings, topics, start, keep, options
        self._changed = asyncio.Event()

    async def __aenter__(self) -> Collector:
        partitions = await self._partitions()
        self._consumer = reader(self._settings, CLIENT_ID, False, **self._options)
        await self._consumer.start()
        self._consumer.assign(partitions)
        if self._start == "end":
            await self._consumer.seek_to_end(*partitions)
            for tp in partitions:
                await self._consumer.position(tp)  # fix "the end" now, not at the first fetch
        else:
            await self._consumer.seek_to_beginning(*partitions)
        self._task = asyncio.create_task(self._collect())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._consumer.stop()

    def named(self, *kinds: type[E], **fields: object) -> list[E]:
        """The events of those classes whose fields have the values given."""
        return [
            e
            for e in self.events
            if isinstance(e, kinds) and all(getattr(e, name, None) == value for name, value in fields.items())
        ]

    async def wait_for(self, done: Callable[[], object], timeout_s: float) -> None:
        """Wait until done() is truthy, checked after every poll; TimeoutError otherwise."""
        async with asyncio.timeout(timeout_s):
            while not done():
                self._changed.clear()
                await self._changed.wait()

    async def _partitions(self) -> list[TopicPartition]:
        async with EventProducer(self._settings, client_id=CLIENT_ID) as producer:
            return [TopicPartition(t, p) for t in self._topics for p in sorted(await producer.raw.partitions_for(t))]

    async def _collect(self) -> None:
        codec = codec_for(self._settings.schema_registry_url)
        while True:
            for records in (await self._consumer.getmany(timeout_ms=POLL_MS)).values():
                read_ms = now_ms()
                for record in records:
                    event = decoded(codec, record)
                    if event is not None and self._keep(event):
                        self.events.append(event)
                        self.read_ms.setdefault(event.event_id, read_ms)
            self._changed.set()


def decoded(codec: Codec, record: ConsumerRecord) -> Event | None:
    """The record's event, or None where it is not one (a tombstone, a poison record)."""
    try:
        return codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
    except DecodeError:
        return None
