"""Where an agent's events go: each to the topic that carries it, keyed by that topic's key field."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import TopicPartition

from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDeregistered,
    AgentHeartbeat,
    AgentRegistered,
    ExperienceRecorded,
    PeerAnswered,
    PeerQuestion,
    TaskCompleted,
    TaskFailed,
    TaskReleased,
    TaskStarted,
    TaskStepTaken,
    TokensUsed,
    VoteCast,
    WaitEnded,
    WaitStarted,
)
from swarmlog.settings import Settings
from swarmlog.topics import INBOX, TopicSpec, catalog


class Outbox:
    """Writes agent events in order, each awaited, and reports how far it wrote; every send tells `wait` how the
    broker answered."""

    def __init__(self, producer: EventProducer, settings: Settings, wait: BrokerWait) -> None:
        self._producer, self._wait = producer, wait
        self._topics: dict[str, TopicSpec] = {  # inbox messages go to a slot, through deliver()
            name: spec
            for spec in catalog(settings)
            if "agent" in spec.writers and spec.name != INBOX
            for name in spec.events
        }

    async def write(self, events: Iterable[Event]) -> dict[TopicPartition, int]:
        """Write the events one after another; the next offset of each partition written to."""
        written: dict[TopicPartition, int] = {}
        for event in events:
            spec = self._topics[event.name]
            payload, key = self._producer.encode_for(spec.name, event), key_of(event).encode()
            headers = self._producer.headers_for(spec.name, key, payload)
            meta = await self._wait.through(
                self._producer.raw.send_and_wait(spec.name, payload, key=key, headers=headers)
            )
            written[TopicPartition(spec.name, meta.partition)] = meta.offset + 1
        return written

    async def deliver(self, message: PeerQuestion | PeerAnswered, slot: int) -> None:
        """Send an inbox message (a peer's question or answer) to the agent on `slot`, keyed by its recipient."""
        payload, key = self._producer.encode_for(INBOX, message), message.to_agent_id.encode()
        headers = self._producer.headers_for(INBOX, key, payload)
        await self._wait.through(
            self._producer.raw.send_and_wait(INBOX, payload, key=key, partition=slot, headers=headers)
        )


def key_of(event: Event) -> str:
    """The partition key of an event an agent writes: the key field of its topic in the catalog."""
    match event:
        case TaskStarted() | TaskStepTaken() | TaskCompleted() | TaskFailed() | TaskReleased() | VoteCast():
            return event.mission_id
        case AgentHeartbeat() | AgentRegistered() | AgentDeregistered() | AgentDeclaredDead():
            return event.agent_id
        case ExperienceRecorded() | TokensUsed():
            return event.agent_id
        case WaitStarted() | WaitEnded():
            return event.waiter_agent_id
        case _:
            raise ValueError(f"{event.name} is not an event an agent writes")
