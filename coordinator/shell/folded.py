"""The coordinator's rocksdict snapshot of its folded journal (`FoldedJournal`, which records where it was read)."""

from __future__ import annotations

import dataclasses
import hashlib
import pickle
from pathlib import Path

from msgspec import Struct
from msgspec.structs import fields
from rocksdict import Rdict

from swarmlog.coordinator import PROJECTION, state
from swarmlog.coordinator.journal import FoldedJournal, Origin, Skip, Unreadable
from swarmlog.schemas import records

__all__ = ["FoldedJournal", "Origin", "load", "save"]


def _layout() -> str:
    """A digest of every field (name and type) of every class a snapshot pickles: a build whose state has other fields,
    or fields of other types, reads none."""
    classes = (
        FoldedJournal,
        Origin,
        Skip,
        Unreadable,
        state.State,
        state.Config,
        state.EnlistedAgent,
        state.MissionState,
        state.Replica,
        state.TaskSpec,
        state.BallotTally,
        state.Candidate,
        state.ConsensusSpec,
    )
    shapes = [(cls.__name__, [(field.name, str(field.type)) for field in dataclasses.fields(cls)]) for cls in classes]
    records_ = [value for value in vars(records).values() if isinstance(value, type) and issubclass(value, Struct)]
    events = [(cls.__name__, [(f.name, repr(f.type)) for f in fields(cls)]) for cls in records_]  # Folded.last
    return hashlib.sha256(repr([*shapes, *events]).encode()).hexdigest()[:16]


SNAPSHOT_KEY = f"journal:v{PROJECTION.snapshot_version}:{_layout()}".encode()
"""Keyed by the projection's snapshot version (what the state's fields mean: bumped by hand when `evolve` changes it)
and by the state's layout (which fields it has: derived, so a changed class needs no bump to be safe): a snapshot of
another version or layout (or the older keys b"folded" and b"journal:<layout>") is a cache miss, never a state this
build misreads."""


def load(path: Path) -> FoldedJournal | None:
    """The snapshot under `path`, or None when there is none or it was written by an incompatible build."""
    with Rdict(str(path)) as db:
        raw = db.get(SNAPSHOT_KEY)
    try:
        snapshot = pickle.loads(raw) if raw is not None else None
        if isinstance(snapshot, FoldedJournal):
            snapshot.origin, snapshot.tip, snapshot.unreadable  # noqa: B018 - every field is there
    except Exception:  # a snapshot from another build is a cache miss, never an error
        return None
    return snapshot if isinstance(snapshot, FoldedJournal) else None


def save(path: Path, folded: FoldedJournal) -> None:
    """Replace the snapshot under `path` (and drop those of other layouts)."""
    path.mkdir(parents=True, exist_ok=True)
    with Rdict(str(path)) as db:
        db[SNAPSHOT_KEY] = pickle.dumps(folded)
        for key in [key for key in db.keys() if key != SNAPSHOT_KEY]:  # noqa: SIM118 (Rdict iterates items)
            del db[key]
