"""The worker's I/O edge: topics of raw bytes, decoding with dead letters, producing events, the clock."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import faust
from faust.types import EventT

from swarmlog.errors import DecodeError
from swarmlog.metrics import Sensor
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.events import Event
from swarmlog.streams.alerts import alert

CONSUMER = "swarmlog-streams"
DEADLETTER = "swarm.deadletter"


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch: the only clock the worker reads, passed into `decide_*`."""
    return time.time_ns() // 1_000_000


def raw_topic(app: faust.App, *names: str, **options: Any) -> faust.TopicT:
    """A topic of undecoded keys and values (the codec runs in the agents, so bad bytes become dead letters)."""
    return app.topic(*names, key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw", **options)


class Io:
    """The codec and where decided events and dead letters go."""

    def __init__(self, app: faust.App, codec: Codec, sensor: Sensor | None = None) -> None:
        self.codec = codec
        self.sensor = sensor or Sensor()
        self._app = app
        self._topics: dict[str, faust.TopicT] = {}

    async def send(self, topic: str, key: str, event: Event) -> None:
        """Produce `event` to `topic` under `key` and wait until the broker has it."""
        if topic not in self._topics:
            self._topics[topic] = raw_topic(self._app, topic)
        pending = await self._topics[topic].send(key=key.encode(), value=self.codec.encode(event))
        await pending
        self.sensor.on_produced(topic)

    async def decoded(self, stream: faust.StreamT) -> AsyncIterator[tuple[EventT, Event]]:
        """The stream's records with their events; an undecodable record goes to the dead letters instead."""
        async for record in stream.events():
            event = await self._decode(record)
            if event is not None:
                yield record, event

    async def decoded_chunks(self, stream: faust.StreamT, size: int,
                             within_s: float) -> AsyncIterator[list[tuple[EventT, Event]]]:
        """The stream's records with their events in chunks of at most `size` or `within_s` seconds, acknowledged
        after each chunk (undecodable records go to the dead letters instead)."""
        async for records in stream.take_events(size, within_s):
            decoded = [(record, await self._decode(record)) for record in records]
            yield [(record, event) for record, event in decoded if event is not None]

    async def _decode(self, record: EventT) -> Event | None:
        message = record.message
        self.sensor.on_consumed(message.topic)
        try:
            return self.codec.decode_record(record.value or b"", message.topic, message.partition, message.offset)
        except DecodeError as exc:
            self.sensor.on_decode_failure(message.topic)
            await self.send(DEADLETTER, message.topic, dead_letter(record, exc))
            return None


def dead_letter(record: EventT, error: DecodeError) -> Event:
    """DeadLetterRecorded for a record: its raw bytes and coordinates, with an id derived from them."""
    message = record.message
    return alert(
        "DeadLetterRecorded",
        now_ms(),
        (message.topic, message.partition, message.offset),
        origin_topic=message.topic,
        origin_partition=message.partition,
        origin_offset=message.offset,
        origin_key=record.key,
        payload=bytes(record.value or b""),
        error_type=type(error).__name__,
        reason=error.reason,
        consumer=CONSUMER,
    )
