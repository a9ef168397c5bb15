"""Supervision of child processes: a child that dies is named, with its exit code or signal and its log's tail."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import pytest

from swarmlog.services import process
from swarmlog.services.supervisor import ChildDied, first_death, unless_a_child_dies


def _child(tmp_path: Path, name: str, code: str) -> process.Child:
    return process.spawn([sys.executable, "-c", code], name=name, log=tmp_path / f"{name}.log")


def test_exits_are_described_by_code_or_by_signal_name() -> None:
    assert process.describe_exit(3) == "exited with code 3"
    assert process.describe_exit(-signal.SIGSEGV) == "was killed by SIGSEGV (signal 11)"
    assert process.describe_exit(-signal.SIGKILL) == "was killed by SIGKILL (signal 9)"


async def test_the_work_is_cancelled_and_the_dead_child_named_with_its_log(tmp_path: Path) -> None:
    """Given a long piece of work and two children, when one dies, the work stops and ChildDied says which and how."""
    sleeper = _child(tmp_path, "sleeper", "import time; time.sleep(60)")
    crasher = _child(tmp_path, "crasher", "import ctypes; print('about to crash', flush=True); ctypes.string_at(0)")
    cancelled = asyncio.Event()

    async def work() -> None:
        try:
            await asyncio.sleep(60)
        finally:
            cancelled.set()

    try:
        with pytest.raises(ChildDied) as died:
            await asyncio.wait_for(unless_a_child_dies(work(), [sleeper, crasher], poll_s=0.1), timeout=30)
    finally:
        process.stop_all([sleeper.popen, crasher.popen])

    message = str(died.value)
    assert message.startswith("crasher was killed by SIGSEGV (signal 11)")
    assert "about to crash" in message and str(crasher.log) in message
    assert cancelled.is_set()


async def test_work_that_ends_first_returns_its_result(tmp_path: Path) -> None:
    sleeper = _child(tmp_path, "sleeper", "import time; time.sleep(60)")
    try:
        assert await unless_a_child_dies(asyncio.sleep(0.2, result="done"), [sleeper], poll_s=0.05) == "done"
        assert first_death([sleeper]) is None
    finally:
        process.stop_all([sleeper.popen])
    death = first_death([sleeper])
    assert death is not None and "sleeper was killed by SIGTERM" in str(death)


def test_stop_all_signals_every_child_before_waiting_for_any(tmp_path: Path) -> None:
    """Children that each take 3 s to stop on SIGTERM all get it together, not one 3 s stop after another."""
    slow = (
        "import signal, time\n"
        "def stop(*_):\n    print(time.time(), flush=True); time.sleep(3); raise SystemExit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\nprint('ready', flush=True)\ntime.sleep(60)"
    )
    children = [_child(tmp_path, f"slow-{index}", slow) for index in range(3)]
    while not all(child.log.read_text().startswith("ready") for child in children):
        time.sleep(0.05)

    process.stop_all([child.popen for child in children])

    assert all(child.popen.returncode == 0 for child in children)
    signalled = [float(child.log.read_text().split()[1]) for child in children]
    assert max(signalled) - min(signalled) < 1.5  # one after another they would be 3 s apart
