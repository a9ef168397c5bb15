"""The base of every event class: what all events have, whatever their record (the classes are in records.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, ClassVar

import msgspec

NAMESPACE = "swarmlog.v1"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Event(msgspec.Struct, frozen=True, gc=False):
    """One swarmlog event: a frozen record of one schema's latest version, with the envelope every schema starts with."""

    name: ClassVar[str] = ""
    """The short Avro record name, e.g. "TaskAssigned"."""

    if TYPE_CHECKING:  # the envelope: declared by every generated class, in the order its readers build it

        @property
        def event_id(self) -> str:
            """The envelope's unique id."""

        @property
        def occurred_at(self) -> int:
            """When the producer says it happened, milliseconds since the epoch."""

        @property
        def correlation_id(self) -> str | None:
            """The mission this event belongs to, if any."""

        @property
        def causation_id(self) -> str | None:
            """event_id of the event that caused this one, if any."""

        @property
        def producer(self) -> str:
            """Who wrote it: 'agent:<id>', 'coordinator:<region>', 'streams', 'client:<name>'."""

    @property
    def mission_id(self) -> str | None:
        """The mission the event is about, where its record has a `mission_id` field (the field replaces this)."""
        return None

    @property
    def agent_id(self) -> str | None:
        """The agent the event is about, where its record has an `agent_id` field (the field replaces this)."""
        return None

    @property
    def task_id(self) -> str | None:
        """The task the event is about, where its record has a `task_id` field (the field replaces this)."""
        return None

    @property
    def attempt(self) -> int | None:
        """The attempt the event is about, where its record has an `attempt` field (the field replaces this)."""
        return None

    @property
    def full_name(self) -> str:
        """The Avro full name, e.g. swarmlog.v1.TaskAssigned."""
        return f"{NAMESPACE}.{self.name}"


def to_millis(value: datetime | int) -> int:
    """Milliseconds since the epoch of a timestamp given as a datetime (naive: UTC) or already as milliseconds."""
    if isinstance(value, int):
        return value
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    delta = value - EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
