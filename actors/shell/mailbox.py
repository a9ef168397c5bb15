"""What a host has read for one of its agents: notices to take at once, inbox records to take when the agent is ready."""

from __future__ import annotations

import asyncio
import collections
import dataclasses

from aiokafka import ConsumerRecord, TopicPartition

from swarmlog.schemas.events import Event


@dataclasses.dataclass(frozen=True, slots=True)
class Notice:
    """A control or registry event for an agent (decoded once by its host), with where it was read."""

    tp: TopicPartition
    offset: int
    event: Event


class Mailbox:
    """One agent's queue: `ready` is set whenever something arrives (or the agent should look again)."""

    def __init__(self) -> None:
        self.inbox: collections.deque[ConsumerRecord] = collections.deque()
        self.notices: collections.deque[Notice] = collections.deque()
        self.ready = asyncio.Event()

    def post(self, item: ConsumerRecord | Notice) -> None:
        """Queue an inbox record or a notice and wake the agent."""
        if isinstance(item, Notice):
            self.notices.append(item)
        else:
            self.inbox.append(item)
        self.ready.set()
