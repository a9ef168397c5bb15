"""The agent's checkpoint survives closing and reopening its store."""

from __future__ import annotations

from swarmlog.actors.domain import AgentState
from swarmlog.actors.store import AgentStore, Checkpoint


def test_a_checkpoint_survives_reopening(tmp_path):
    saved = Checkpoint(AgentState("a", frozenset({("m", "t", 0, 1)}), frozenset({("m", "t", 0, 1)}),
                                  frozenset({"b1"}), throttled=True), inbox=7, log={0: 3, 5: 9})
    store = AgentStore(tmp_path)
    assert store.load("a") is None
    store.save(saved)
    store.close()
    reopened = AgentStore(tmp_path)
    assert reopened.load("a") == saved
    reopened.close()
