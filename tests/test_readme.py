"""The README's "Running a swarm yourself", typed as written: its commands are read from the README itself."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECTION = "## Running a swarm yourself"


def walkthrough() -> tuple[dict[str, str], str]:
    """The section's `swarmlog up` lines by broker kind (alternatives: one runs at a time), and the second shell's
    script."""
    section = (ROOT / "README.md").read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    up_block, script = re.findall(r"```sh\n(.*?)```", section, re.S)
    ups = {}
    for line in up_block.splitlines():
        command = line.split("#", 1)[0].strip()
        if command:
            ups["kafka" if "--broker kafka" in command else "tansu"] = command
    return ups, script


def without_swarmlog_settings() -> dict[str, str]:
    """This environment less every SWARMLOG_* variable: a user's fresh shell (the suite sets some for itself)."""
    return {name: value for name, value in os.environ.items() if not name.startswith("SWARMLOG_")}


def test_the_section_has_an_up_line_per_broker_and_a_script_that_submits_and_watches() -> None:
    ups, script = walkthrough()
    assert set(ups) == {"tansu", "kafka"}
    assert "swarmlog submit" in script and 'swarmlog watch "$MISSION_ID"' in script


@contextlib.contextmanager
def started_up(command: str):
    """The README's `up` line running in its own shell; yields the export line it printed."""
    up = subprocess.Popen(
        command,
        shell=True,
        cwd=ROOT,
        env=without_swarmlog_settings(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in up.stdout or ()], daemon=True).start()
    printed: list[str] = []
    try:
        deadline = time.monotonic() + 120
        while not (printed and printed[-1].startswith("export SWARMLOG_")):
            try:
                printed.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                pytest.fail(f"`{command}` printed no export line:\n{''.join(printed)}")
        yield printed[-1].strip()
    finally:
        os.killpg(up.pid, signal.SIGTERM)
        try:
            up.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(up.pid, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("broker_kind", ["tansu", "kafka"])
def test_the_readme_walkthrough_completes_its_mission(broker_kind: str, tmp_path: Path) -> None:
    """Given the README's `up` line for the broker, when its second shell's script runs after the printed export
    line (agents on the scripted brain, state under a fresh cache dir), the mission completes and every line exits 0."""
    ups, script = walkthrough()
    log = tmp_path / "shell.log"
    with started_up(ups[broker_kind]) as export, log.open("w") as output:
        env = without_swarmlog_settings() | {
            "SWARMLOG_BRAIN": "scripted",
            "SWARMLOG_CACHE_DIR": str(tmp_path),
            "COLUMNS": "200",
        }  # a terminal wide enough for the timeline's table
        shell = subprocess.Popen(
            ["bash", "-e", "-c", f"{export}\n{script}"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            code = shell.wait(300)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGTERM)  # the background streams, coordinator and agents
            time.sleep(3)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shell.pid, signal.SIGKILL)
    printed = log.read_text()
    assert code == 0, printed[-4000:]
    assert "MissionCompleted" in printed and "success: True" in printed, printed[-4000:]
    assert "ConsensusReached" in printed  # the timeline
