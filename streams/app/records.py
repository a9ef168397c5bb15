"""The worker's I/O edge: topics of raw bytes, its inputs with dead letters, producing events, the clock.

Every record a processor reads is either an input (it decodes, keeps its invariants and is an event its topic carries)
or dead-lettered once, with its coordinates and why, and a WARNING line saying so; either way it counts as processed,
so a record the worker cannot use never holds back what waits for the worker to catch up (deaths).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Collection, Mapping
from typing import Any

import faust
from faust.types import TP, EventT

from swarmlog.errors import DecodeError
from swarmlog.kafka.records import NotAnInput, fitted, with_note
from swarmlog.metrics import Sensor
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings
from swarmlog.streams.alerts import alert
from swarmlog.topics import catalog

from .progress import Progress

CONSUMER = "swarmlog-streams"
DEADLETTER = "swarm.deadletter"
logger = logging.getLogger(__name__)


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the only clock the worker reads, passed into `decide_*`."""
    return time.time_ns() // 1_000_000


def raw_topic(app: faust.App, *names: str, **options: Any) -> faust.TopicT:
    """A topic of undecoded keys and values (the codec runs in the agents, so bad bytes become dead letters)."""
    return app.topic(*names, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw", **options)


def carried(settings: Settings) -> dict[str, frozenset[str]]:
    """The events each catalog topic carries, by topic name."""
    return {spec.name: frozenset(spec.events) for spec in catalog(settings)}


class Io:
    """The codec, the events each input topic carries, and where decided events and dead letters go."""

    def __init__(self, app: faust.App, codec: Codec, sensor: Sensor | None = None, *,
                 topics: Mapping[str, Collection[str]], max_message_bytes: int) -> None:
        self.codec = codec
        self.sensor = sensor or Sensor()
        self._app = app
        self._carried = {topic: frozenset(events) for topic, events in topics.items()}
        self._max_message_bytes = max_message_bytes
        self._topics: dict[str, faust.TopicT] = {}
        self._dead_lettered: dict[TP, int] = {}  # the last offset dead-lettered per partition: redeliveries skip it

    def carries(self, topic: str, events: Collection[str]) -> None:
        """Declare the events an internal topic carries (the catalog's topics are known already)."""
        self._carried[topic] = frozenset(events)

    async def send(self, topic: str, key: str, event: Event) -> None:
        """Produce `event` to `topic` under `key` and wait until the broker has it."""
        if topic not in self._topics:
            self._topics[topic] = raw_topic(self._app, topic)
        pending = await self._topics[topic].send(key=key.encode(), value=self.codec.encode(event))
        await pending
        self.sensor.on_produced(topic)

    async def decoded(self, stream: faust.StreamT,
                      progress: Progress | None = None) -> AsyncIterator[tuple[EventT, Event]]:
        """The stream's inputs with their events; any other record goes to the dead letters instead. `progress`
        hears of every record: of an input once the loop over this is back for the next one, of the rest at once."""
        async for record in stream.events():
            event = await self._input(record)
            if event is not None:
                yield record, event
            if progress is not None:
                progress.processed(record.message.tp, record.message.offset)

    async def decoded_chunks(self, stream: faust.StreamT, size: int,
                             within_s: float) -> AsyncIterator[list[tuple[EventT, Event]]]:
        """The stream's inputs with their events in chunks of at most `size` or `within_s` seconds, acknowledged
        after each chunk (any other record goes to the dead letters instead)."""
        async for records in stream.take_events(size, within_s):
            decoded = [(record, await self._input(record)) for record in records]
            yield [(record, event) for record, event in decoded if event is not None]

    async def _input(self, record: EventT) -> Event | None:
        """The record's event if it is an input of its topic; else None once it is dead-lettered."""
        message = record.message
        self.sensor.on_consumed(message.topic)
        try:
            event = self.codec.decode_record(record.value or b"", message.topic, message.partition, message.offset)
        except DecodeError as exc:
            await self._dead_letter(record, exc)
            return None
        events = self._carried.get(message.topic, frozenset())
        if event.name not in events:
            carries = ", ".join(sorted(events)) or "nothing this worker reads"
            reason = f"{event.name} {event.event_id} does not belong on {message.topic}, which carries {carries}"
            await self._dead_letter(record, NotAnInput(reason, topic=message.topic, partition=message.partition,
                                                       offset=message.offset))
            return None
        return event

    async def _dead_letter(self, record: EventT, error: DecodeError) -> None:
        message = record.message
        if self._dead_lettered.get(message.tp, -1) >= message.offset:  # read again after a rebalance: done already
            return
        self.sensor.on_decode_failure(message.topic)
        await self.send(DEADLETTER, message.topic, dead_letter(record, error, self._max_message_bytes))
        self._dead_lettered[message.tp] = message.offset
        logger.warning("dead-lettered %s[%d]@%d (%d bytes): %s", message.topic, message.partition, message.offset,
                       len(record.value or b""), error.reason)


def dead_letter(record: EventT, error: DecodeError, max_message_bytes: int) -> Event:
    """DeadLetterRecorded for a record: its raw bytes (cut to fit `max_message_bytes`) and coordinates, with an id
    derived from them, so a repeat after a crash is the same event."""
    message = record.message
    payload, key, note = fitted(bytes(record.value or b""), record.key, max_message_bytes)
    return alert(
        "DeadLetterRecorded",
        now_ms(),
        (message.topic, message.partition, message.offset),
        origin_topic=message.topic,
        origin_partition=message.partition,
        origin_offset=message.offset,
        origin_key=key,
        payload=payload,
        error_type=type(error).__name__,
        reason=with_note(error.reason, note),
        consumer=CONSUMER,
    )
