"""Records to state: decode each record (problems kept with their coordinates), order them, fold them."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from swarmlog.errors import DecodeError
from swarmlog.replay.components import Component
from swarmlog.schemas.codec import Codec, default_codec
from swarmlog.schemas.events import Event


@dataclasses.dataclass(frozen=True, slots=True)
class Record:
    """One record as read from the log or a history file: where it sits, its timestamp and raw bytes."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """A record that did not decode, at its coordinates; the replay goes on without it."""

    topic: str
    partition: int
    offset: int
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Replayed:
    """A fold's result: the state, how many events were folded, and the records that did not decode."""

    state: Any
    events: int
    problems: tuple[Problem, ...]


def ordered(records: Iterable[Record]) -> list[Record]:
    """Each partition in offset order, partitions merged by record timestamp (ties: topic, partition)."""
    by_partition = itertools.groupby(sorted(records, key=lambda r: (r.topic, r.partition, r.offset)),
                                     key=lambda r: (r.topic, r.partition))
    return list(heapq.merge(*(list(group) for _, group in by_partition),
                            key=lambda r: (r.timestamp, r.topic, r.partition)))


def decoded(records: Iterable[Record], codec: Codec | None = None) -> Iterator[tuple[Record, Event | Problem]]:
    """Each record with its event, or with the Problem saying where and why it did not decode."""
    codec = codec or default_codec()
    for record in records:
        try:
            yield record, codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
        except DecodeError as error:
            yield record, Problem(record.topic, record.partition, record.offset, error.reason)


def selected(component: Component, key: str | None, regions: tuple[str, ...],
             records: Iterable[Record]) -> list[Record]:
    """The records of the component's source topics (and partitions), in fold order."""
    partitions = component.partitions(key, regions)
    return ordered(r for r in records if r.topic in component.topics and (partitions is None or r.partition in partitions))


def replay(component: Component, key: str | None, regions: tuple[str, ...], records: Iterable[Record],
           codec: Codec | None = None) -> Replayed:
    """The component's state after folding `records` (of its topics) from its initial state, with the problems."""
    key = component.resolve(key, regions)
    state, events, problems = component.start(key, regions), 0, []
    for _, event in decoded(selected(component, key, regions, records), codec):
        if isinstance(event, Problem):
            problems.append(event)
        else:
            state, events = component.evolve(state, event), events + 1
    return Replayed(state, events, tuple(problems))
