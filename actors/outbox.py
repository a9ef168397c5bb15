"""Where an agent's events go: each to the topic that carries it, keyed by that topic's key field."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import TopicPartition

from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings
from swarmlog.topics import TopicSpec, catalog

TASKS_TOPIC = "swarm.tasks.events"
INBOX_TOPIC = "swarm.agents.inbox"


class Outbox:
    """Writes agent events in order, each awaited, and reports how far it wrote; every send tells `wait` how the
    broker answered."""

    def __init__(self, producer: EventProducer, settings: Settings, wait: BrokerWait) -> None:
        self._producer, self._wait = producer, wait
        self._topics: dict[str, TopicSpec] = {  # inbox messages go to a slot, through deliver()
            name: spec
            for spec in catalog(settings)
            if "agent" in spec.writers and spec.name != INBOX_TOPIC
            for name in spec.events
        }

    async def write(self, events: Iterable[Event]) -> dict[TopicPartition, int]:
        """Write the events one after another; the next offset of each partition written to."""
        written: dict[TopicPartition, int] = {}
        for event in events:
            spec = self._topics[event.name]
            key = event.data.get(spec.key)
            payload = self._producer.encode_for(spec.name, event)
            meta = await self._wait.through(
                self._producer.raw.send_and_wait(spec.name, payload, key=None if key is None else key.encode())
            )
            written[TopicPartition(spec.name, meta.partition)] = meta.offset + 1
        return written

    async def deliver(self, message: Event, slot: int) -> None:
        """Send an inbox message (a peer's question or answer) to the agent on `slot`, keyed by its recipient."""
        payload = self._producer.encode_for(INBOX_TOPIC, message)
        await self._wait.through(
            self._producer.raw.send_and_wait(
                INBOX_TOPIC, payload, key=message.data["to_agent_id"].encode(), partition=slot
            )
        )
