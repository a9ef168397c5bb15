"""A host's local rocksdict store: per agent, its task state, inbox position and log positions, written in one batch.

One store per host process, one key per agent (`checkpoint/<agent id>`): a fleet of 2,000 agents is one RocksDB.

Every position belongs to one Kafka cluster: the checkpoint records the cluster id it was taken on, so that recovery
can tell a checkpoint of this log from one left by another cluster (see actors/shell/recovery.py). It records the
version of its encoding too (the agent projection's snapshot version): one of another version is not read back, and
recovery folds the log again instead.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path

from aiokafka import TopicPartition
from rocksdict import Rdict, WriteBatch

from swarmlog.actors.domain import PROJECTION, AgentState

PREFIX = "checkpoint/"
UNVERSIONED = 1  # the version of a checkpoint written before checkpoints recorded theirs


@dataclasses.dataclass(frozen=True, slots=True)
class Checkpoint:
    """State as of inbox offset `inbox` (the next to read) and `positions` (the next offset of each partition of the
    projection's topics), all on the cluster `cluster` (None: unknown, or a broker without an id)."""

    state: AgentState
    inbox: int
    positions: Mapping[TopicPartition, int]
    cluster: str | None = None
    slot: int | None = None
    """The inbox partition `inbox` is an offset of (None: written before checkpoints recorded it): a position in one
    partition means nothing in another, so an agent whose slot changed does not resume from it."""


@dataclasses.dataclass(frozen=True, slots=True)
class Outdated:
    """A checkpoint written in another version of the encoding: not read back."""

    version: int


def key_of(agent_id: str) -> str:
    """The key of an agent's checkpoint."""
    return PREFIX + agent_id


class AgentStore:
    """One checkpoint per agent; each save is a single atomic RocksDB write."""

    def __init__(self, path: Path) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._db = Rdict(str(path))

    def load(self, agent_id: str) -> Checkpoint | Outdated | None:
        """The last checkpoint, Outdated when written in another encoding, or None for a new agent."""
        raw = self._db.get(key_of(agent_id))
        if raw is None:
            return None
        saved = json.loads(raw)
        version = saved.get("version", UNVERSIONED)
        if version != PROJECTION.snapshot_version:
            return Outdated(version)
        state = AgentState(
            agent_id,
            frozenset(map(tuple, saved["started"])),
            {tuple(key): at for *key, at in saved["closed"]},
            saved["ballots"],
            saved["throttled"],
            saved["seen"],
        )
        positions = {
            TopicPartition(topic, int(partition)): offset
            for topic, offsets in saved["positions"].items()
            for partition, offset in offsets.items()
        }
        return Checkpoint(state, saved["inbox"], positions, saved["cluster"], saved.get("slot"))

    def save(self, checkpoint: Checkpoint) -> None:
        """Replace the checkpoint of its agent in one write batch."""
        state = checkpoint.state
        positions: dict[str, dict[int, int]] = {}
        for tp, offset in sorted(checkpoint.positions.items()):
            positions.setdefault(tp.topic, {})[tp.partition] = offset
        batch = WriteBatch()
        batch.put(
            key_of(state.agent_id),
            json.dumps(
                {
                    "version": PROJECTION.snapshot_version,
                    "started": sorted(state.started),
                    "closed": sorted([*key, at] for key, at in state.closed.items()),
                    "ballots": dict(state.ballots),
                    "seen": state.seen_ms,
                    "throttled": state.throttled,
                    "inbox": checkpoint.inbox,
                    "slot": checkpoint.slot,
                    "positions": positions,
                    "cluster": checkpoint.cluster,
                }
            ),
        )
        self._db.write(batch)

    def close(self) -> None:
        """Flush and close the database."""
        self._db.close()
