"""Chaos: a 200-task mission while the coordinator process is kill -9'd three times at random moments."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from swarmlog.schemas.records import MissionCompleted, TaskAssigned, TaskResultRecorded
from swarmlog.settings import Settings

from .harness import task
from .live import crew, eventually, journal, journal_writes, named, submit
from .test_shell import assert_each_attempt_once, completed

pytestmark = [pytest.mark.slow, pytest.mark.kafka_only]
REGION, TASKS, AGENTS, FIRST_SLOT = "region-1", 200, 8, 30


async def test_kill_9_three_times_at_random_during_a_200_task_mission_loses_and_doubles_nothing(
    settings: Settings, tmp_path: Path
):
    seed = random.randrange(2**32)
    chaos = random.Random(seed)
    kills = sorted(chaos.sample(range(10, TASKS - 10), 3))  # after that many results, plus a random delay
    print(f"\nchaos seed {seed}: kill -9 after {kills} results")
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"chaos200-{uuid.uuid4().hex[:8]}"
    plan = [task(f"t{i}", capability, depends_on=[f"t{i - 20}"] if i >= 20 else []) for i in range(TASKS)]
    env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    command = [sys.executable, "-m", "swarmlog", "coordinator", "--region", REGION, "--data-dir", str(tmp_path)]
    async with crew(settings, REGION, AGENTS, capability, first_slot=FIRST_SLOT, latency_s=0.02) as agents:
        process = subprocess.Popen(command, env=env)
        await submit(settings, mission_id, REGION, plan)
        try:
            for kill_after in kills:
                await eventually(lambda n=kill_after: _results_at_least(settings, mission_id, n), timeout_s=60)
                await asyncio.sleep(chaos.uniform(0, 0.5))
                assert process.poll() is None, "the coordinator died on its own"
                process.send_signal(signal.SIGKILL)
                process.wait()
                process = subprocess.Popen(command, env=env)
            events = await eventually(lambda: completed(settings, REGION, mission_id), timeout_s=80)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
    assert named(events, MissionCompleted)[0].tasks_completed == TASKS
    assert_each_attempt_once(events, agents)
    recorded = sorted(e.task_id for e in named(events, TaskResultRecorded) if not e.stale)
    assert recorded == sorted(f"t{i}" for i in range(TASKS)), "each task completed exactly once"
    writes = await journal_writes(settings, REGION, mission_id)
    largest_write = max(len(named(written, TaskAssigned)) for _, written in writes)  # a poll's decisions, one write
    assert sum(agent.duplicates for agent in agents) <= len(kills) * largest_write, "only the last write is re-sent"


async def _results_at_least(settings: Settings, mission_id: str, count: int) -> bool:
    """Whether the region's journal holds at least `count` results of the mission."""
    return len(named(await journal(settings, REGION, mission_id), TaskResultRecorded)) >= count
