"""A history's artifacts: the ones its events reference, copied beside the history file on export, read back from there."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from pathlib import Path

from swarmlog.artifacts import ArtifactError, ArtifactStore, BlobDirectory
from swarmlog.replay.fold import Record, decoded
from swarmlog.schemas.artifacts import PREFIX, ArtifactRef, references
from swarmlog.schemas.events import Event

MARKER = PREFIX.encode()


@dataclasses.dataclass(frozen=True, slots=True)
class Checked:
    """One referenced artifact and why it cannot be read (None when it can)."""

    ref: str
    size: int
    problem: str | None


def beside(history: Path) -> BlobDirectory:
    """The blob directory of a history file's artifacts: `<file>.artifacts/`, next to it."""
    return BlobDirectory(history.with_name(history.name + ".artifacts"))


def referenced(records: Iterable[Record]) -> list[ArtifactRef]:
    """Every artifact the records' events reference, once each, by hash (only records whose bytes hold a reference's
    prefix are decoded: Avro writes strings as they are)."""
    marked = (record for record in records if record.value and MARKER in record.value)
    found = {ref for _, event in decoded(marked) if isinstance(event, Event) for ref in references(event)}
    return sorted(found, key=lambda ref: ref.sha256)


def checked(refs: Iterable[ArtifactRef], source: ArtifactStore, copy_to: BlobDirectory | None = None) -> list[Checked]:
    """Read each artifact from `source` (checking its hash and size), writing it into `copy_to` when given."""
    results = []
    for ref in refs:
        try:
            data = source.get(ref)
        except ArtifactError as exc:
            results.append(Checked(str(ref), ref.size, str(exc)))
            continue
        if copy_to is not None:
            copy_to.put(data)
        results.append(Checked(str(ref), ref.size, None))
    return results
