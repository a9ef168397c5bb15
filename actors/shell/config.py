"""Who an agent is and how it runs: what its host needs to place it and what the actor needs to work."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from swarmlog.actors.actions import MAX_ACTION_TOKENS
from swarmlog.actors.groundtruth import DEFAULT_DOCUMENT


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Who this agent is and how it runs."""

    agent_id: str
    capabilities: tuple[str, ...]
    brain: str
    model: str | None
    gpu: int | None
    node: str
    region: str
    slot: int | None
    """The inbox partition; None: the one its region's coordinator allocates (SlotAllocated on swarm.agents.slots)."""
    data_dir: Path
    heartbeat_s: float = 1.0
    drain_s: float = 10.0
    max_tokens: int = MAX_ACTION_TOKENS
    ask_peers: bool = False
    ask_timeout_s: float = 60.0
    ground_truth: str = DEFAULT_DOCUMENT
    resync_s: float = 60.0
    concurrency: int = 1
    """How many tasks it runs at once (announced as its capacity; the brain batches their generations)."""
