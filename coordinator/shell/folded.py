"""The coordinator's rocksdict snapshot of its folded journal (`Folded`, which records where it was read)."""

from __future__ import annotations

import pickle
from pathlib import Path

from rocksdict import Rdict

from swarmlog.coordinator.journal import Folded, Origin

__all__ = ["Folded", "Origin", "load", "save"]

SNAPSHOT_KEY = b"journal"
"""Snapshots written before they recorded their origin used the key b"folded"; they are not read (a cache miss)."""


def load(path: Path) -> Folded | None:
    """The snapshot under `path`, or None when there is none or it was written by an incompatible build."""
    with Rdict(str(path)) as db:
        raw = db.get(SNAPSHOT_KEY)
    try:
        snapshot = pickle.loads(raw) if raw is not None else None
        if isinstance(snapshot, Folded):
            snapshot.origin, snapshot.tip, snapshot.unreadable  # noqa: B018 - every field is there
    except Exception:  # a snapshot from another build is a cache miss, never an error
        return None
    return snapshot if isinstance(snapshot, Folded) else None


def save(path: Path, folded: Folded) -> None:
    """Replace the snapshot under `path`."""
    path.mkdir(parents=True, exist_ok=True)
    with Rdict(str(path)) as db:
        db[SNAPSHOT_KEY] = pickle.dumps(folded)
