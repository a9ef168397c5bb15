"""`swarmlog demo`, the README's first command: a real three-phase mission on the embedded default, supervised."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

DEMO = [sys.executable, "-m", "swarmlog", "demo"]


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: pip install 'swarmlog[llamacpp]'",
)
def test_the_demo_runs_a_three_phase_mission_to_consensus_and_success_and_prints_one_json_object() -> None:
    result = subprocess.run([*DEMO, "--json", "--timeout-s", "400"], capture_output=True, text=True, timeout=600)

    assert result.returncode == 0, result.stderr[-3000:]
    outcome = json.loads(result.stdout)
    assert outcome["mission"] == "MissionCompleted" and outcome["success"] is True
    assert outcome["agent_count"] == 4
    assert outcome["tasks_completed"] >= 5 and outcome["malformed_count"] == 0
    assert outcome["latency_ms"] > 0 and outcome["tokens_used"] > 0
    assert outcome["consensus_ms"] is not None and len(outcome["outputs"]) == 1
    for phase in ("phase WORK", "phase CONSENSUS", "phase FINAL"):
        assert phase in result.stderr
    assert "ConsensusReached" in result.stderr and "ConsensusTimedOut" not in result.stderr, result.stderr[-3000:]


def _script(tmp_path: Path, **fields: object) -> Path:
    """A scripted-brain file: valid actions after a latency, plus the given fields."""
    path = tmp_path / "brain.json"
    path.write_text(json.dumps({"median_ms": 2000.0} | fields))
    return path


def _demo_until_exit(argv: list[str], when_started: str | None = None, then=None) -> tuple[int, str, float]:
    """Run the demo; once `when_started`'s pid is printed, call `then(pid)`. Its exit code, stderr, and the seconds
    from that call (or from the start) to its exit."""
    demo = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines, acted = [], time.monotonic()
    try:
        for line in demo.stderr:  # type: ignore[union-attr]
            lines.append(line)
            started = re.search(rf"started {when_started} \(pid (\d+)", line) if when_started else None
            if started and then is not None:
                then(int(started.group(1)))
                acted = time.monotonic()
        code = demo.wait(60)
    finally:
        if demo.poll() is None:
            demo.kill()
    return code, "".join(lines), time.monotonic() - acted


@pytest.mark.slow
def test_a_demo_whose_agent_is_killed_names_it_and_the_signal_and_exits_1(tmp_path: Path) -> None:
    """Given a demo on scripted agents, when an agent is killed with SIGKILL, the demo says which agent died and how,
    with its log's tail, stops the others and exits 1, instead of waiting for the mission's timeout."""
    argv = [*DEMO, "--brain", "scripted", "--model", str(_script(tmp_path)), "--timeout-s", "300"]

    def kill_after_registration(pid: int) -> None:
        time.sleep(3)  # registered and heartbeating: a death, not a failed start
        os.kill(pid, signal.SIGKILL)

    code, stderr, seconds = _demo_until_exit(argv, "agent-2", kill_after_registration)

    assert code == 1, stderr[-3000:]
    assert "error: agent-2 was killed by SIGKILL (signal 9)" in stderr
    assert "agent-2.log ends:" in stderr
    assert seconds < 30, f"the demo took {seconds:.0f} s to notice and stop"  # a mechanism bound, polled every 0.5 s


@pytest.mark.slow
def test_a_demo_whose_model_segfaults_says_so_with_the_crash_in_the_log_and_exits_1(tmp_path: Path) -> None:
    """Given agents whose model dies of SIGSEGV at its first generation, the demo names the agent and SIGSEGV, shows
    the fault in its log (not a silent agent), and exits 1."""
    argv = [*DEMO, "--brain", "scripted", "--model", str(_script(tmp_path, segfault_at=0)), "--timeout-s", "300"]

    code, stderr, seconds = _demo_until_exit(argv)

    assert code == 1, stderr[-3000:]
    assert re.search(r"error: agent-\d was killed by SIGSEGV \(signal 11\)", stderr), stderr[-3000:]
    assert "Fatal Python error: Segmentation fault" in stderr
    assert seconds < 120, f"the demo took {seconds:.0f} s in all"
