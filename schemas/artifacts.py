"""Artifacts by reference, pure: the wire form of a reference, the rule that makes one, and finding them in events.

A text too large for an event travels as a reference to a content-addressed artifact: the string
`artifact:sha256:<64 lowercase hex digits>:<size in bytes>` stands in the event's field for the text's UTF-8 bytes.
Every string field an output passes through (a step's content, a task's output, a downstream task's inputs, a
ballot's candidates, the consensus, a mission's outputs) carries it unchanged, so no schema changes and two outputs
are equal exactly when their references are.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Iterator
from typing import Any, TypeVar

import msgspec

from swarmlog.schemas.events import Event

PREFIX = "artifact:sha256:"
PATTERN = re.compile(r"artifact:sha256:([0-9a-f]{64}):([0-9]{1,19})")
EVENT_ROOM_BYTES = 64 * 1024
"""Bytes of an event kept for its fields besides the texts inlined in it."""
DEFAULT_INLINE_BYTES = 64 * 1024
"""The largest text (UTF-8 bytes) inlined in an event by default; a 2,048-token output is at most half of it."""

E = TypeVar("E", bound=Event)


@dataclasses.dataclass(frozen=True, slots=True)
class ArtifactRef:
    """A content-addressed artifact: the SHA-256 of its bytes (hex) and their number."""

    sha256: str
    size: int

    @classmethod
    def of(cls, data: bytes) -> ArtifactRef:
        """The reference of these bytes."""
        return cls(hashlib.sha256(data).hexdigest(), len(data))

    def __str__(self) -> str:
        return f"{PREFIX}{self.sha256}:{self.size}"


def parse(text: str) -> ArtifactRef | None:
    """The reference a field's text is, or None when it is a text of its own."""
    if not text.startswith(PREFIX):
        return None
    found = PATTERN.fullmatch(text)
    return None if found is None else ArtifactRef(found[1], int(found[2]))


def inlined(text: str, limit: int) -> bool:
    """Whether a text travels in the event itself: its UTF-8 bytes are at most `limit`."""
    return len(text) <= limit // 4 or len(text.encode()) <= limit


def externalized(event: E, limit: int) -> tuple[E, dict[ArtifactRef, bytes]]:
    """The event with each of its text fields over `limit` bytes replaced by its reference, and the artifacts those
    references name (to be stored before the event is written)."""
    artifacts: dict[ArtifactRef, bytes] = {}
    changes: dict[str, str] = {}
    for name in event.__struct_fields__:
        value = getattr(event, name)
        if isinstance(value, str) and not inlined(value, limit):
            data = value.encode()
            ref = ArtifactRef.of(data)
            artifacts[ref] = data
            changes[name] = str(ref)
    return (msgspec.structs.replace(event, **changes) if changes else event), artifacts


def references(event: Event) -> Iterator[ArtifactRef]:
    """Every reference an event's fields hold, nested records, lists and maps included."""
    yield from _found(msgspec.structs.astuple(event))


def _found(value: Any) -> Iterator[ArtifactRef]:
    """The references within one field's value."""
    if isinstance(value, str):
        ref = parse(value)
        if ref is not None:
            yield ref
    elif isinstance(value, msgspec.Struct):
        yield from _found(msgspec.structs.astuple(value))
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _found(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _found(item)
