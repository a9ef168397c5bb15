"""One region's journal partition folded by offset: the state, the records that did not decode, and the repairs.

A record that does not decode is never guessed at: it is noted as `Unreadable`, and the fold goes on. Whether that is
acceptable is decided once the whole partition is read: a `JournalRecordsSkipped` event (written by
`swarmlog coordinator repair`) records offsets an operator found undecodable and chose to pass over. It covers only
offsets before its own, and only records that do not decode: a record that decodes is always folded, so a repair
can never erase a decision that was acted on. `FoldedJournal.unresolved` is what is left; a coordinator refuses to start
while it is not empty, and status and replay report it.

Pure: the shell decodes records and hands this module events or the reason they did not decode.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

from swarmlog.coordinator.evolve import PROJECTION
from swarmlog.coordinator.state import State
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import JournalRecordsSkipped


@dataclasses.dataclass(frozen=True, slots=True)
class Unreadable:
    """A journal record that did not decode, at its offset, with the decoder's reason."""

    offset: int
    reason: str


@dataclasses.dataclass(frozen=True, slots=True)
class Skip:
    """A recorded repair: the undecodable records at `offsets` (all before `at`) are passed over."""

    at: int
    offsets: frozenset[int]
    reason: str
    operator: str

    def describe(self) -> str:
        """One line for reports: where the repair is, who made it and why."""
        return f"skipped by the repair at offset {self.at} ({self.operator}: {self.reason})"


def skip_of(event: Event, offset: int) -> Skip | None:
    """The repair a journal event at `offset` records (offsets at or after its own ignored), or None."""
    if not isinstance(event, JournalRecordsSkipped):
        return None
    return Skip(offset, frozenset(o for o in event.offsets if 0 <= o < offset), event.reason, event.operator)


def covering(skips: Iterable[Skip], offset: int) -> Skip | None:
    """The first repair that passes over the record at `offset`, or None."""
    return next((skip for skip in skips if offset in skip.offsets), None)


@dataclasses.dataclass(frozen=True, slots=True)
class Origin:
    """Where a journal partition was read: the cluster's id, the partition, and the first offset its log held."""

    cluster_id: str | None
    partition: int
    log_start: int


@dataclasses.dataclass(frozen=True, slots=True)
class FoldedJournal:
    """A prefix of one region's journal, folded: recovery and the live loop advance it with the same `fold`.

    `offset` is the last offset read, `tip` the (offset, event id) of the last event that decoded, `last` the events
    of the last write (their inbox messages are re-sent after a crash: the only ones that may be missing). A write is
    named by the id its records carry (`write`; a record header); records without one (journals written before writes
    were named) each belong to their decision, as they did.
    """

    state: State
    clock: int = 0
    offset: int = -1
    last: tuple[Event, ...] = ()
    tip: tuple[int, str] | None = None
    skips: tuple[Skip, ...] = ()
    unreadable: tuple[Unreadable, ...] = ()
    origin: Origin | None = None
    write: str | None = None

    def fold(self, event: Event, offset: int, write: str | None = None) -> FoldedJournal:
        """After one more journal event at `offset`, of the write named `write`: clock = the latest occurred_at,
        last = its write's events (its decision's where the write is not named).

        A repair changes no state and is not a decision: it only adds to `skips`."""
        tip = (offset, event.event_id)
        skip = skip_of(event, offset)
        if skip is not None:
            return FoldedJournal(
                self.state,
                max(self.clock, event.occurred_at),
                offset,
                self.last,
                tip,
                (*self.skips, skip),
                self.unreadable,
                self.origin,
                self.write,
            )
        if write is None:
            same = bool(self.last) and self.write is None and self.last[-1].causation_id == event.causation_id
        else:
            same = write == self.write
        return FoldedJournal(
            PROJECTION.evolve(self.state, event),
            max(self.clock, event.occurred_at),
            offset,
            (*self.last, event) if same else (event,),
            tip,
            self.skips,
            self.unreadable,
            self.origin,
            write,
        )

    def written(self, write: str, events: Sequence[Event], offsets: Sequence[int], state: State) -> FoldedJournal:
        """After this coordinator's own write `write` of decisions' `events` at `offsets`, whose fold over this state
        is `state` (the decisions'): the same as folding them one by one, without evolving the state again. Never a
        repair."""
        return dataclasses.replace(
            self,
            state=state,
            clock=max(self.clock, *(event.occurred_at for event in events)),
            offset=offsets[-1],
            last=tuple(events),
            tip=(offsets[-1], events[-1].event_id),
            write=write,
        )

    def pass_over(self, offset: int, reason: str) -> FoldedJournal:
        """After a record at `offset` that did not decode: noted, nothing guessed."""
        return dataclasses.replace(self, offset=offset, unreadable=(*self.unreadable, Unreadable(offset, reason)))

    @property
    def unresolved(self) -> tuple[Unreadable, ...]:
        """The undecodable records no repair passes over: while there are any, the journal is not to be trusted."""
        return tuple(record for record in self.unreadable if covering(self.skips, record.offset) is None)

    @property
    def skipped(self) -> Mapping[int, Skip]:
        """The undecodable records a repair passes over, by offset, with that repair."""
        return {
            record.offset: skip
            for record in self.unreadable
            if (skip := covering(self.skips, record.offset)) is not None
        }
