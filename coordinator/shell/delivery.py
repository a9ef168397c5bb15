"""Writing decisions: journal events as one record batch on the region's partition, then their inbox messages."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.coordinator.inbox import Message
from swarmlog.coordinator.shell.recovery import JOURNAL
from swarmlog.errors import EncodeError
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.topics import INBOX


class Delivery:
    """One unit of work = one Kafka transaction where the producer is transactional, else plain writes and a commit."""

    def __init__(
        self,
        producer: EventProducer,
        inputs: AIOKafkaConsumer,
        *,
        region: str,
        partition: int,
        group_id: str,
        transactional: bool,
    ) -> None:
        self._producer = producer
        self._inputs = inputs
        self._key = region.encode()
        self._partition = partition
        self._group_id = group_id
        self.transactional = transactional

    @contextlib.asynccontextmanager
    async def unit(self) -> AsyncIterator[None]:
        """Everything written inside becomes visible together (Kafka) or in the order written (Tansu)."""
        if not self.transactional:
            yield
            return
        async with self._producer.raw.transaction():
            yield

    async def journal(self, events: Sequence[Event]) -> int:
        """Append one decision's events as a single record batch, so a crash leaves all or none; the first offset."""
        batch = self._producer.raw.create_batch()
        for event in events:
            if batch.append(key=self._key, value=self._producer.encode_for(JOURNAL, event), timestamp=None) is None:
                raise EncodeError(
                    f"decision {event.causation_id} ({len(events)} events) does not fit one "
                    "record batch; raise SWARMLOG_MAX_MESSAGE_BYTES and the journal's max.message.bytes"
                )
        sent = await self._producer.raw.send_batch(batch, JOURNAL, partition=self._partition)
        first: int = (await sent).offset
        return first

    async def inbox(self, messages: Sequence[Message]) -> None:
        """Send each message to its recipient's inbox partition, in order."""
        for message in messages:
            await self._producer.send(INBOX, message.event, key=message.agent_id, partition=message.slot)

    async def ack(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit the inputs consumed: inside the transaction, or after everything they caused was written."""
        if self.transactional:
            await self._producer.raw.send_offsets_to_transaction(offsets, self._group_id)
        else:
            await self._inputs.commit(offsets)
