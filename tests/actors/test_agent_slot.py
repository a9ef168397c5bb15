"""An agent whose slot is not a partition of the inbox topic stops at once, saying so, instead of hanging on it."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from agent_harness import start_agent

from swarmlog.settings import Settings


def test_a_slot_past_the_inbox_topic_is_a_configuration_error(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # The settings say 1,000 inbox partitions (so the CLI accepts the slot); the topic has the suite's fewer.
    monkeypatch.setenv("SWARMLOG_INBOX_PARTITIONS", "1000")
    agent_id = f"slotless-{uuid.uuid4().hex[:8]}"
    process = start_agent(settings, agent_id, 900, tmp_path, "--brain", "scripted")
    assert process.wait(60) == 3  # the README's exit code for configuration errors
    log = (tmp_path / f"{agent_id}.log").read_text()
    assert "slot 900 is not a partition of swarm.agents.inbox" in log, log[-2000:]
