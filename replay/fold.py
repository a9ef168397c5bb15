"""Records to state: decode each record (problems kept with their coordinates), order them, fold them."""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import operator
from collections.abc import Iterable, Iterator
from typing import Any, NamedTuple

from swarmlog.collector import collector_paused
from swarmlog.coordinator.journal import Skip, covering, skip_of
from swarmlog.errors import DecodeError
from swarmlog.kafka.records import TOPIC_EVENTS, input_event
from swarmlog.replay.components import Component
from swarmlog.schemas.codec import Codec, default_codec
from swarmlog.schemas.events import Event
from swarmlog.topics import JOURNAL


class Record(NamedTuple):
    """One record as read from the log or a history file: where it sits, its timestamp and raw bytes.

    A named tuple, not a dataclass: a history holds a million of them, and a tuple is built three times faster.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


@dataclasses.dataclass(frozen=True, slots=True)
class Problem:
    """A record that did not decode (or decoded to an event of a kind its topic does not carry), at its coordinates;
    the replay goes on without it. `skipped` says which recorded repair (JournalRecordsSkipped) passes over it, if
    one does."""

    topic: str
    partition: int
    offset: int
    reason: str
    skipped: str | None = None


class Repairs:
    """The journal repairs seen while records are decoded, per journal partition: which problems they pass over."""

    def __init__(self) -> None:
        self._skips: dict[int, list[Skip]] = {}

    def note(self, record: Record, event: Event) -> None:
        """Keep the repair a decoded record holds, if it is one on the journal."""
        skip = skip_of(event, record.offset) if record.topic == JOURNAL else None
        if skip is not None:
            self._skips.setdefault(record.partition, []).append(skip)

    def resolve(self, problems: Iterable[Problem]) -> tuple[Problem, ...]:
        """The problems, each journal record a repair passes over marked with that repair."""
        return tuple(self._resolved(problem) for problem in problems)

    def _resolved(self, problem: Problem) -> Problem:
        if problem.topic != JOURNAL:
            return problem
        skip = covering(self._skips.get(problem.partition, ()), problem.offset)
        return problem if skip is None else dataclasses.replace(problem, skipped=skip.describe())


@dataclasses.dataclass(frozen=True, slots=True)
class Replayed:
    """A fold's result: the state, how many events were folded, and the records that did not decode."""

    state: Any
    events: int
    problems: tuple[Problem, ...]


def ordered(records: Iterable[Record]) -> list[Record]:
    """Each partition in offset order, partitions merged by record timestamp (ties: topic, partition)."""
    records = list(records)
    if _in_fold_order(records):  # a history file or a single partition usually is: no sort, no merge
        return records
    by_partition = itertools.groupby(sorted(records, key=_PLACE), key=_PARTITION)
    return list(heapq.merge(*(list(group) for _, group in by_partition), key=_MERGE))


_PLACE = operator.attrgetter("topic", "partition", "offset")
_PARTITION = operator.attrgetter("topic", "partition")
_MERGE = operator.attrgetter("timestamp", "topic", "partition")
_OFFSET = operator.attrgetter("offset")


def _in_fold_order(records: list[Record]) -> bool:
    """Whether `ordered` would return `records` as they are: merge keys never fall, offsets rise per partition."""
    keys = list(map(_MERGE, records))
    if any(map(operator.gt, keys, itertools.islice(keys, 1, None))):
        return False
    last: dict[tuple[str, int], int] = {}
    latest = last.get
    for place, offset in zip(map(_PARTITION, records), map(_OFFSET, records), strict=False):
        if latest(place, -1) >= offset:
            return False
        last[place] = offset
    return True


def decoded(records: Iterable[Record], codec: Codec | None = None) -> Iterator[tuple[Record, Event | Problem]]:
    """Each record with its event, or with the Problem saying where and why it is no event of its topic: it did not
    decode, or it is of a kind its topic does not carry (as the live readers dead-letter it; a topic outside the
    catalog is not checked)."""
    codec = codec or default_codec()
    decode, carried = codec.decode, TOPIC_EVENTS.get
    for record in records:
        carries = carried(record.topic)
        try:
            event: Event | Problem = (
                decode(record.value or b"") if carries is None else input_event(codec, record, carries)
            )
        except DecodeError as error:
            event = Problem(record.topic, record.partition, record.offset, error.reason)
        yield record, event


def selected(
    component: Component, key: str | None, regions: tuple[str, ...], records: Iterable[Record]
) -> list[Record]:
    """The records of the component's source topics (and partitions), in fold order."""
    topics, partitions = component.topics, component.partitions(key, regions)
    if partitions is None:
        return ordered([record for record in records if record.topic in topics])
    return ordered([record for record in records if record.topic in topics and record.partition in partitions])


def replay(
    component: Component,
    key: str | None,
    regions: tuple[str, ...],
    records: Iterable[Record],
    codec: Codec | None = None,
) -> Replayed:
    """The component's state after folding `records` (of its topics) from its initial state, with the problems; a
    component whose table is partitioned like its topics folds each partition on its own, as that table does."""
    key = component.resolve(key, regions)
    problems: list[Problem] = []
    repairs = Repairs()
    folded = 0

    def events(part: Iterable[Record]) -> Iterator[Event]:
        nonlocal folded
        for record, event in decoded(part, codec):
            if isinstance(event, Problem):
                problems.append(event)
            else:
                repairs.note(record, event)
                folded += 1
                yield event

    chosen = selected(component, key, regions, records)
    with collector_paused():
        start = component.start(key, regions)
        if component.rows is None or component.from_table is None:
            state = component.fold(start, events(chosen))
        else:
            rows: dict[str, Any] = {}
            for part in _by_partition(chosen):
                rows.update(component.rows(component.fold(start, events(part))))
            state = component.from_table(rows)
    return Replayed(state, folded, repairs.resolve(problems))


def _by_partition(records: list[Record]) -> list[list[Record]]:
    """The records of each partition number (across topics), in their fold order."""
    parts: dict[int, list[Record]] = {}
    for record in records:
        parts.setdefault(record.partition, []).append(record)
    return [parts[partition] for partition in sorted(parts)]
