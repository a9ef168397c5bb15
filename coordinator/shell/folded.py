"""The journal folded so far (state, clock, last offset, last decision), and its rocksdict snapshot."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

from rocksdict import Rdict

from swarmlog.coordinator import State, evolve
from swarmlog.schemas.events import Event

SNAPSHOT_KEY = b"folded"


@dataclasses.dataclass(frozen=True, slots=True)
class Folded:
    """A prefix of one region's journal, folded: recovery and the live loop advance it with the same `fold`."""

    state: State
    clock: int = 0
    offset: int = -1
    last: tuple[Event, ...] = ()

    def fold(self, event: Event, offset: int) -> Folded:
        """After one more journal event at `offset`: clock = the latest occurred_at, last = its decision's events."""
        same = bool(self.last) and self.last[-1].data["causation_id"] == event.data["causation_id"]
        return Folded(evolve(self.state, event), max(self.clock, event.occurred_at_ms), offset,
                      (*self.last, event) if same else (event,))


def load(path: Path) -> Folded | None:
    """The snapshot under `path`, or None when there is none or it was written by an incompatible build."""
    with Rdict(str(path)) as db:
        raw = db.get(SNAPSHOT_KEY)
    try:
        snapshot = pickle.loads(raw) if raw is not None else None
    except Exception:  # a snapshot from another build is a cache miss, never an error
        return None
    return snapshot if isinstance(snapshot, Folded) else None


def save(path: Path, folded: Folded) -> None:
    """Replace the snapshot under `path`."""
    path.mkdir(parents=True, exist_ok=True)
    with Rdict(str(path)) as db:
        db[SNAPSHOT_KEY] = pickle.dumps(folded)
