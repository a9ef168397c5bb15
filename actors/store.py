"""The agent's local rocksdict store: its task state, inbox position and log positions, written in one batch."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rocksdict import Rdict, WriteBatch

from swarmlog.actors.domain import AgentState

KEY = "checkpoint"


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """State as of inbox offset `inbox` (the next to read) and swarm.tasks.events offsets `log` (partition → next)."""

    state: AgentState
    inbox: int
    log: dict[int, int]


class AgentStore:
    """One checkpoint per agent; each save is a single atomic RocksDB write."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self._db = Rdict(str(path))

    def load(self, agent_id: str) -> Checkpoint | None:
        """The last checkpoint, or None for a new agent."""
        raw = self._db.get(KEY)
        if raw is None:
            return None
        saved = json.loads(raw)
        state = AgentState(agent_id, *(frozenset(map(tuple, saved[name])) for name in ("started", "closed")),
                           frozenset(saved["ballots"]), saved["throttled"])
        return Checkpoint(state, saved["inbox"], {int(p): o for p, o in saved["log"].items()})

    def save(self, checkpoint: Checkpoint) -> None:
        """Replace the checkpoint in one write batch."""
        state = checkpoint.state
        batch = WriteBatch()
        batch.put(KEY, json.dumps({
            "started": sorted(state.started), "closed": sorted(state.closed), "ballots": sorted(state.ballots),
            "throttled": state.throttled, "inbox": checkpoint.inbox, "log": checkpoint.log,
        }))
        self._db.write(batch)

    def close(self) -> None:
        """Flush and close the database."""
        self._db.close()
