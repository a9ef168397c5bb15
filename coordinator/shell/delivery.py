"""Writing decisions: journal events in record batches on the region's partition (a decision never split), then
their inbox messages, then the inputs' offsets (committed in the background)."""

from __future__ import annotations

import asyncio
from asyncio import Future
from collections.abc import Mapping, Sequence
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.coordinator.inbox import Message
from swarmlog.coordinator.shell.recovery import JOURNAL, WRITE_HEADER
from swarmlog.errors import EncodeError
from swarmlog.kafka.commits import BackgroundCommits
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event

RECORD_OVERHEAD_BYTES = 32
"""An upper bound on a journal record's bytes in a v2 record batch besides its key, value and header."""
BATCH_OVERHEAD_BYTES = 61
"""A v2 record batch's own header."""


class Delivery:
    """A poll's decisions written journal first: their journal records (one write, named by a header), then their inbox
    messages, then the inputs' offsets. No transactions: the producer is idempotent where the broker has one."""

    def __init__(
        self,
        producer: EventProducer,
        inputs: AIOKafkaConsumer,
        *,
        region: str,
        partition: int,
        max_batch_bytes: int,
    ) -> None:
        self._producer = producer
        self._commits = BackgroundCommits(inputs)
        self._key = region.encode()
        self._partition = partition
        self._max_batch_bytes = max_batch_bytes
        self._journaled: dict[str, tuple[Event, bytes]] = {}  # this write's journal events and bytes, by id

    async def journal(self, write: str, decisions: Sequence[Sequence[Event]]) -> list[int]:
        """Append decisions' events as the write named `write`, each decision whole in one record batch (so a crash
        leaves all or none of it), in as few batches as fit; every event's offset. The batches are sent at once and
        awaited together."""
        batches: list[list[bytes]] = [[]]
        filled = BATCH_OVERHEAD_BYTES  # an upper bound on the last batch's bytes
        for events in decisions:
            encoded = self._encoded(events)
            size = self._size(encoded, write)
            if batches[-1] and filled + size > self._max_batch_bytes:
                batches.append([])
                filled = BATCH_OVERHEAD_BYTES
            batches[-1].extend(encoded)
            filled += size
        sent = [await self._send_batch(write, values, decisions) for values in batches]
        firsts = [(await future).offset for future in sent]
        return [first + index for first, values in zip(firsts, batches, strict=True) for index in range(len(values))]

    def misfit(self, events: Sequence[Event], write: str) -> str | None:
        """None when a decision's events fit one record batch of the write named `write` (they are then encoded for
        `journal`), else why not, with the sizes."""
        try:
            size = BATCH_OVERHEAD_BYTES + self._size(self._encoded(events), write)
        except EncodeError as error:  # one event alone is over the limit
            return str(error)
        if size <= self._max_batch_bytes:
            return None
        return (
            f"its decision ({len(events)} events, about {size} bytes) does not fit one journal write of "
            f"{self._max_batch_bytes} bytes"
        )

    def _encoded(self, events: Sequence[Event]) -> list[bytes]:
        """The events' journal bytes, kept (by id) until the write's inbox messages are sent."""
        encoded = []
        for event in events:
            kept, value = self._journaled.get(event.event_id, (None, b""))
            if kept is not event:
                value = self._producer.encode_for(JOURNAL, event)
                self._journaled[event.event_id] = (event, value)
            encoded.append(value)
        return encoded

    def _size(self, values: Sequence[bytes], write: str) -> int:
        """An upper bound on the bytes journal values of the write named `write` take in a record batch."""
        overhead = RECORD_OVERHEAD_BYTES + len(self._key) + len(WRITE_HEADER) + len(write.encode())
        return sum(len(value) for value in values) + len(values) * (overhead + self._producer.signature_bytes)

    async def _send_batch(
        self, write: str, values: Sequence[bytes], decisions: Sequence[Sequence[Event]]
    ) -> Future[Any]:
        """One record batch of journal values of the write on the region's partition; the future of its write."""
        batch = self._producer.raw.create_batch()
        named = [(WRITE_HEADER, write.encode())]
        for value in values:
            headers = named + self._producer.headers_for(JOURNAL, self._key, value)
            if batch.append(key=self._key, value=value, timestamp=None, headers=headers) is None:
                causes = ", ".join(events[0].causation_id or "" for events in decisions)
                raise EncodeError(
                    f"a decision of {causes} does not fit one record batch ({len(values)} records, "
                    f"{sum(map(len, values))} bytes, {batch.size()} in the batch so far); raise "
                    "SWARMLOG_MAX_MESSAGE_BYTES and the journal's max.message.bytes"
                )
        sent: Future[Any] = await self._producer.raw.send_batch(batch, JOURNAL, partition=self._partition)
        return sent

    async def inbox(self, messages: Sequence[Message]) -> None:
        """Send each message to its recipient's inbox partition, or its slot allocation to swarm.agents.slots (in order
        per partition), then await them all."""
        sent = []
        for message in messages:
            value, key = self._payload(message.event, message.topic), message.agent_id.encode()
            headers = self._producer.headers_for(message.topic, key, value)
            sent.append(
                await self._producer.raw.send(message.topic, value, key=key, partition=message.slot, headers=headers)
            )
        self._journaled.clear()
        await asyncio.gather(*sent)

    def _payload(self, event: Event, topic: str) -> bytes:
        """The event's bytes: those just journaled when it is a journal event itself (an assignment, a slot
        allocation), else encoded for its topic."""
        journaled, value = self._journaled.get(event.event_id, (None, b""))
        return value if journaled is event else self._producer.encode_for(topic, event)

    def ack(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit the inputs consumed, once everything they caused is written, without waiting for it: a restart before
        the commit lands reads them again, and finds their decisions in the journal (see `service`)."""
        self._commits.note(offsets)

    async def settle(self) -> None:
        """Wait for the inputs' offsets acked so far to be committed."""
        await self._commits.settle()
