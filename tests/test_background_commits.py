"""Offsets committed in the background: one commit in flight, what is noted meanwhile goes with the next, newest per
partition; a failed commit is raised, never lost."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest
from aiokafka import ConsumerRecord, TopicPartition

from swarmlog.kafka.commits import BackgroundCommits, offsets_after

A, B = TopicPartition("inputs", 0), TopicPartition("inputs", 1)


class GatedConsumer:
    """A consumer whose commits each wait for the test to open the gate, and are recorded in order."""

    def __init__(self, failure: Exception | None = None) -> None:
        self.commits: list[dict[TopicPartition, int]] = []
        self.in_flight = 0
        self.most_in_flight = 0
        self.gate = asyncio.Event()
        self._failure = failure

    async def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.gate.wait()
            if self._failure is not None:
                raise self._failure
            self.commits.append(dict(offsets))
        finally:
            self.in_flight -= 1


async def test_offsets_noted_during_a_commit_go_with_the_next_one_newest_per_partition():
    consumer = GatedConsumer()
    commits = BackgroundCommits(consumer)
    commits.note({A: 3})
    await asyncio.sleep(0)  # the first commit is in flight, held at the gate
    commits.note({A: 5, B: 1})
    commits.note({A: 7})
    assert consumer.commits == []  # noting never waits for the broker
    consumer.gate.set()
    await commits.settle()
    assert consumer.commits == [{A: 3}, {A: 7, B: 1}]
    assert consumer.most_in_flight == 1


async def test_a_note_after_the_commits_settled_starts_a_new_one():
    consumer = GatedConsumer()
    consumer.gate.set()
    commits = BackgroundCommits(consumer)
    commits.note({A: 1})
    await commits.settle()
    commits.note({B: 2})
    await commits.settle()
    assert consumer.commits == [{A: 1}, {B: 2}]


async def test_settle_with_nothing_noted_commits_nothing():
    consumer = GatedConsumer()
    await BackgroundCommits(consumer).settle()
    assert consumer.commits == []


async def test_a_failed_commit_is_raised_at_the_next_note_and_at_settle():
    consumer = GatedConsumer(failure=RuntimeError("the group coordinator is gone"))
    consumer.gate.set()
    commits = BackgroundCommits(consumer)
    commits.note({A: 1})
    with pytest.raises(RuntimeError, match="group coordinator"):
        await commits.settle()
    with pytest.raises(RuntimeError, match="group coordinator"):
        commits.note({A: 2})


def test_the_offsets_after_a_poll_are_one_past_each_partitions_last_record():
    def record(tp: TopicPartition, offset: int) -> ConsumerRecord[bytes, bytes]:
        return ConsumerRecord(tp.topic, tp.partition, offset, 0, 0, None, b"", None, 0, 0, ())

    polled = [record(A, 4), record(A, 5), record(B, 9)]
    assert offsets_after(polled) == {A: 6, B: 10}
