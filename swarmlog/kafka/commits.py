"""Input offsets committed off the hot path: one commit in flight at a time, each carrying every offset noted since."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Protocol

from aiokafka import ConsumerRecord, TopicPartition


class Committing(Protocol):
    """What a consumer offers to commit offsets (AIOKafkaConsumer)."""

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit these offsets for the consumer's group."""


class BackgroundCommits:
    """Commits a consumer's offsets in a task of its own, so that the loop that noted them goes on reading.

    A group commit is a round trip to the group coordinator (6–12 ms on Apache Kafka here, several produce round trips)
    that nothing downstream waits on: it only bounds what a restart reads again. Offsets noted while a commit is in
    flight go with the next one, newest per partition. A commit that failed raises at the next `note` or at `settle`,
    where an awaited commit would have raised one poll earlier."""

    def __init__(self, consumer: Committing) -> None:
        self._consumer = consumer
        self._pending: dict[TopicPartition, int] = {}
        self._task: asyncio.Task[None] | None = None

    def note(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit these offsets soon (after those noted before them); raise the error of a commit that failed."""
        self._pending.update(offsets)
        if self._task is not None:
            if not self._task.done():
                return  # the commit in flight takes these up when it is done
            self._task.result()
        if self._pending:
            self._task = asyncio.create_task(self._commit(), name="background-commits")

    async def settle(self) -> None:
        """Wait until every offset noted so far is committed; raise the error of a commit that failed."""
        if self._task is not None:
            await self._task

    async def _commit(self) -> None:
        """Commit what is pending, again while more was noted meanwhile."""
        while self._pending:
            offsets, self._pending = self._pending, {}
            await self._consumer.commit(offsets)


def offsets_after(records: Iterable[ConsumerRecord]) -> dict[TopicPartition, int]:
    """The offsets to commit once these records are handled (each partition's in offset order): one past its last."""
    return {TopicPartition(record.topic, record.partition): record.offset + 1 for record in records}
