"""The agent's local rocksdict store: its task state, inbox position and log positions, written in one batch.

Every position belongs to one Kafka cluster: the checkpoint records the cluster id it was taken on, so that recovery
can tell a checkpoint of this log from one left by another cluster (see actors/shell/recovery.py).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from rocksdict import Rdict, WriteBatch

from swarmlog.actors.domain import AgentState

KEY = "checkpoint"


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """State as of inbox offset `inbox` (the next to read), swarm.tasks.events offsets `log` and swarm.control
    offsets `control` (partition → next), all on the cluster `cluster` (None: unknown, or a broker without an id)."""

    state: AgentState
    inbox: int
    log: dict[int, int]
    control: dict[int, int] = dataclasses.field(default_factory=dict)
    cluster: str | None = None


class AgentStore:
    """One checkpoint per agent; each save is a single atomic RocksDB write."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = Rdict(str(path))

    def load(self, agent_id: str) -> Checkpoint | None:
        """The last checkpoint, or None for a new agent."""
        raw = self._db.get(KEY)
        if raw is None:
            return None
        saved = json.loads(raw)
        # Checkpoints written before closed attempts and ballots had times give them time 0: they are dropped at the
        # next event, once recovery has folded back in what closed after the checkpoint (all a redelivery needs).
        closed = {tuple(entry[:4]): entry[4] if len(entry) > 4 else 0 for entry in saved["closed"]}
        ballots = saved["ballots"]
        state = AgentState(
            agent_id,
            frozenset(map(tuple, saved["started"])) - closed.keys(),
            closed,
            dict.fromkeys(ballots, 0) if isinstance(ballots, list) else ballots,
            saved["throttled"],
            saved.get("seen", 0),
        )
        return Checkpoint(
            state, saved["inbox"], _positions(saved["log"]), _positions(saved.get("control", {})), saved.get("cluster")
        )  # older checkpoints have neither

    def save(self, checkpoint: Checkpoint) -> None:
        """Replace the checkpoint in one write batch."""
        state = checkpoint.state
        batch = WriteBatch()
        batch.put(
            KEY,
            json.dumps(
                {
                    "started": sorted(state.started),
                    "closed": sorted([*key, at] for key, at in state.closed.items()),
                    "ballots": dict(state.ballots),
                    "seen": state.seen_ms,
                    "throttled": state.throttled,
                    "inbox": checkpoint.inbox,
                    "log": checkpoint.log,
                    "control": checkpoint.control,
                    "cluster": checkpoint.cluster,
                }
            ),
        )
        self._db.write(batch)

    def close(self) -> None:
        """Flush and close the database."""
        self._db.close()


def _positions(saved: dict[str, int]) -> dict[int, int]:
    """Partition → offset, from JSON's string keys."""
    return {int(p): o for p, o in saved.items()}
