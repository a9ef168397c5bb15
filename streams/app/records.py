"""The worker's I/O edge: topics of raw bytes, its inputs with dead letters, producing events, the clock.

Every record a processor reads is either an input (it decodes, keeps its invariants and is an event its topic carries)
or dead-lettered once, with its coordinates and why, and a WARNING line saying so; either way it counts as processed,
so a record the worker cannot use never holds back what waits for the worker to catch up (deaths).
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections.abc import AsyncIterator, Collection, Sequence
from typing import Any, Protocol, TypeAlias

import faust
from faust.streams import _current_event
from faust.types import EventT

from swarmlog import topics
from swarmlog.errors import DecodeError
from swarmlog.kafka.records import TOPIC_EVENTS, dead_letter, dead_letter_id, input_event
from swarmlog.kafka.signing import Signer, Trust
from swarmlog.metrics import Sensor
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.events import Event

CONSUMER = "swarmlog-streams"
logger = logging.getLogger(__name__)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the only clock the worker reads, passed into `decide_*`."""
    return time.time_ns() // 1_000_000


class Consumed(Protocol):
    """A consumed record, Faust's message, aiokafka's or replay's: its coordinates, key and value bytes (read-only)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...


RawStream: TypeAlias = faust.StreamT[bytes]
"""A stream of a raw topic, as an agent gets it."""
RawRecord: TypeAlias = EventT[bytes]
"""One record of a raw stream, with its message (coordinates, key and value bytes)."""


def inside(record: RawRecord) -> None:
    """Make `record` the current event of the running task, so that the tables read and write its partition: Faust
    picks a table's partition from the current event, which a chunk taken from a stream (`decoded_chunks`) leaves
    unset. Only the task's context variable is set, as Faust sets it per event: the stream's own `current_event` is
    what its take buffer reads for the next record, so it is left alone."""
    _current_event.set(weakref.ref(record))


def raw_topic(app: faust.App, *names: str, **options: Any) -> faust.TopicT:
    """A topic of undecoded keys and values (the codec runs in the agents, so bad bytes become dead letters)."""
    return app.topic(*names, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw", **options)


class WorkerTopics:
    """The codec, the events each input topic carries, and where decided events and dead letters go."""

    def __init__(
        self,
        app: faust.App,
        codec: Codec,
        sensor: Sensor | None = None,
        *,
        max_message_bytes: int,
        signer: Signer | None = None,
        trust: Trust | None = None,
    ) -> None:
        self.codec = codec
        self._signer, self._trust = signer, trust
        self.sensor = sensor or Sensor()
        self._app = app
        self._carried: dict[str, frozenset[str]] = dict(TOPIC_EVENTS)
        self._max_message_bytes = max_message_bytes
        self._topics: dict[str, faust.TopicT] = {}
        self._dead_lettered: dict[tuple[str, int], int] = {}  # the last offset dead-lettered per partition: skipped

    def carries(self, topic: str, events: Collection[str]) -> None:
        """Declare the events an internal topic carries (the catalog's topics are known already)."""
        self._carried[topic] = frozenset(events)

    async def send(self, topic: str, key: str, event: Event) -> None:
        """Produce `event` to `topic` under `key` and wait until the broker has it."""
        await self.send_all(topic, [(key, event)])

    async def send_all(self, topic: str, events: Sequence[tuple[str, Event]]) -> None:
        """Produce each (key, event) to `topic`, then wait until the broker has them all (one round trip, not one
        each: 250 deaths of a killed host sent one by one took seconds)."""
        if topic not in self._topics:
            self._topics[topic] = raw_topic(self._app, topic)
        pending = [await self._send(topic, key.encode(), self.codec.encode(event)) for key, event in events]
        await asyncio.gather(*pending)
        self.sensor.on_produced(topic, len(pending))

    async def _send(self, topic: str, key: bytes, value: bytes) -> Any:
        """Produce one record, signed when the worker signs; the future of its delivery."""
        headers = [] if self._signer is None else self._signer.headers(topic, key, value)
        return await self._topics[topic].send(key=key, value=value, headers=headers)

    async def decoded_chunks(
        self, stream: RawStream, size: int, within_s: float
    ) -> AsyncIterator[list[tuple[RawRecord, Event]]]:
        """The stream's inputs with their events in chunks of at most `size` records or `within_s` seconds (any other
        record goes to the dead letters instead), acknowledged once the loop over this is back for the next chunk."""
        assert isinstance(stream, faust.Stream), "an agent's stream"
        async for records in stream.take_events(size, within_s):
            decoded = [(record, await self.input_of(record.message)) for record in records]
            yield [(record, event) for record, event in decoded if event is not None]

    async def input_of(self, message: Consumed) -> Event | None:
        """The record's event if it is an input of its topic; else None once it is dead-lettered."""
        self.sensor.on_consumed(message.topic)
        try:
            return input_event(self.codec, message, self._carried.get(message.topic, frozenset()), self._trust)
        except DecodeError as error:
            await self._dead_letter(message, error)
            return None

    async def _dead_letter(self, message: Consumed, error: DecodeError) -> None:
        where = (message.topic, message.partition)
        if self._dead_lettered.get(where, -1) >= message.offset:  # read again after a rebalance: done already
            return
        self.sensor.on_decode_failure(message.topic)
        letter = dead_letter(
            message,
            error,
            CONSUMER,
            max_message_bytes=self._max_message_bytes,
            event_id=dead_letter_id(message.topic, message.partition, message.offset),
        )
        await self.send(topics.DEAD_LETTERS, message.topic, letter)
        self._dead_lettered[where] = message.offset
        logger.warning(
            "dead-lettered %s[%d]@%d (%d bytes): %s",
            message.topic,
            message.partition,
            message.offset,
            len(message.value or b""),
            letter.reason,
        )
