"""The in-memory shape of an event: its record name and field values, as folds and decisions see it."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

NAMESPACE = "swarmlog.v1"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class Event:
    """One swarmlog event: the short Avro record name (e.g. "TaskAssigned") and its fields."""

    name: str
    data: Mapping[str, Any]

    @property
    def full_name(self) -> str:
        """The Avro full name, e.g. swarmlog.v1.TaskAssigned."""
        return f"{NAMESPACE}.{self.name}"

    @property
    def event_id(self) -> str:
        """The envelope's unique id."""
        return self.data["event_id"]

    @property
    def occurred_at_ms(self) -> int:
        """The envelope's timestamp in milliseconds since the epoch."""
        return to_millis(self.data["occurred_at"])


def to_millis(value: datetime | int) -> int:
    """Milliseconds since the epoch of a timestamp-millis value (decoders give aware datetimes)."""
    if isinstance(value, int):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
