"""`swarmlog demo --json`, the README's first command: a real three-phase mission on the embedded default."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None,
                    reason="llama_cpp is not importable: pip install 'swarmlog[llamacpp]'")
def test_the_demo_runs_a_three_phase_mission_to_success_and_prints_one_json_object() -> None:
    result = subprocess.run([sys.executable, "-m", "swarmlog", "demo", "--json", "--timeout-s", "400"],
                            capture_output=True, text=True, timeout=600)

    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout)
    assert outcome["mission"] == "MissionCompleted" and outcome["success"] is True
    assert outcome["agent_count"] == 4
    assert outcome["tasks_completed"] >= 5 and outcome["malformed_count"] == 0
    assert outcome["latency_ms"] > 0 and outcome["tokens_used"] > 0
    assert outcome["consensus_ms"] is not None and len(outcome["outputs"]) == 1
    for phase in ("phase WORK", "phase CONSENSUS", "phase FINAL"):
        assert phase in result.stderr
