"""The pure part of the Redis memory projection: which key, value and expiry an experience becomes, and write batches.

Expiry is absolute (`expire_at_ms` = occurred_at + ttl_s, for Redis SET ... PXAT), so a write's plan depends only
on its event; `now_ms` only decides whether the experience has already expired (then it is not written at all).
Batches are flush intervals aligned to the epoch on event time: an experience of a later interval flushes the
batch before it; a tick at or after the batch's interval end flushes it too.
"""

from __future__ import annotations

import dataclasses
import json

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import ExperienceRecorded

DEFAULT_FLUSH_INTERVAL_MS = 500


@dataclasses.dataclass(frozen=True, slots=True)
class MemoryWrite:
    """One Redis write: SET `key` `value` PXAT `expire_at_ms`."""

    key: str
    value: str
    expire_at_ms: int


def plan_write(event: Event, now_ms: int) -> MemoryWrite | None:
    """The write an ExperienceRecorded becomes, or None for other events and experiences expired by `now_ms`."""
    if not isinstance(event, ExperienceRecorded):
        return None
    expire_at_ms = event.occurred_at + event.ttl_s * 1000
    if expire_at_ms <= now_ms:
        return None
    record = {
        "content": event.content,
        "kind": event.kind,
        "agent": event.agent_id,
        "node": event.node,
        "embedding": list(event.embedding),
        "mission": event.mission_id,
    }
    value = json.dumps(record, sort_keys=True, separators=(",", ":"))
    return MemoryWrite(f"experience:{event.experience_id}", value, expire_at_ms)


@dataclasses.dataclass(frozen=True, slots=True)
class WriteBatcher:
    """Writes waiting for the end of their flush interval (a value: every operation returns a new batcher)."""

    interval_ms: int = DEFAULT_FLUSH_INTERVAL_MS
    batch_start: int | None = None
    pending: tuple[MemoryWrite, ...] = ()

    def add(self, write: MemoryWrite, at_ms: int) -> tuple[WriteBatcher, tuple[MemoryWrite, ...]]:
        """Queue `write` of an event at `at_ms`; returns the batcher and the batch this closed (maybe empty)."""
        start = at_ms - at_ms % self.interval_ms
        if self.batch_start is None or start <= self.batch_start:
            batch_start = start if self.batch_start is None else self.batch_start
            return dataclasses.replace(self, batch_start=batch_start, pending=(*self.pending, write)), ()
        return dataclasses.replace(self, batch_start=start, pending=(write,)), self._batch()

    def tick(self, now_ms: int) -> tuple[WriteBatcher, tuple[MemoryWrite, ...]]:
        """Flush the batch if its interval has ended by `now_ms`."""
        if self.batch_start is None or now_ms < self.batch_start + self.interval_ms:
            return self, ()
        return self.flush()

    def flush(self) -> tuple[WriteBatcher, tuple[MemoryWrite, ...]]:
        """Flush whatever is pending (on shutdown or a rebalance)."""
        return dataclasses.replace(self, batch_start=None, pending=()), self._batch()

    def _batch(self) -> tuple[MemoryWrite, ...]:
        return tuple({write.key: write for write in self.pending}.values())
