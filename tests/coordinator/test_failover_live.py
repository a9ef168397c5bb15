"""Agent failover with real processes: kill -9 an agent mid-task; streams declares it dead, the coordinator moves on.

The Faust streams worker, `swarmlog coordinator` and three `swarmlog agent --brain scripted` processes run on the
test's broker. One agent is killed while it holds a task; its next attempt must run on another agent and the
mission complete, every (task, replica) recorded once. Prints the failover time: kill → AgentDeclaredDead →
TaskReassigned → TaskAssigned of the next attempt.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from swarmlog.kafka.admin import ensure_topics
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentEnlisted,
    MissionCompleted,
    TaskAssigned,
    TaskReassigned,
    TaskResultRecorded,
    TaskStarted,
)
from swarmlog.settings import Settings
from swarmlog.topics import JOURNAL, REGISTRY, TASK_EVENTS

from .harness import task
from .live import eventually, named, submit
from .test_shell import completed

sys.path[:0] = [str(Path(__file__).parents[1] / "streams"), str(Path(__file__).parents[1] / "actors")]
from agent_harness import Log, start_agent
from worker_harness import Worker

pytestmark = pytest.mark.slow
REGION, TASKS, AGENTS, FIRST_SLOT = "region-0", 6, 3, 40
LIVENESS_TIMEOUT_MS, HEARTBEAT_S = 2000, 0.25
BRAIN = {"median_ms": 1500, "sigma": 0.15}  # ~1.2-1.9 s a task


async def test_a_killed_agent_s_task_moves_to_another_agent_and_the_mission_completes(
    settings: Settings, tmp_path: Path
):
    await ensure_topics(settings)
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"failover-{uuid.uuid4().hex[:8]}"
    brain = tmp_path / "brain.json"
    brain.write_text(json.dumps(BRAIN))
    env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    worker = Worker(
        settings.bootstrap,
        settings.broker,
        settings.redis_url,
        tmp_path / "streams",
        liveness_timeout_ms=LIVENESS_TIMEOUT_MS,
    )
    agent_ids = [f"{capability}-{index}" for index in range(AGENTS)]
    processes: dict[str, subprocess.Popen] = {}
    async with Log(settings, REGISTRY, JOURNAL, TASK_EVENTS) as log:
        with (tmp_path / "coordinator.log").open("ab") as coordinator_log:
            processes["coordinator"] = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "swarmlog",
                    "coordinator",
                    "--region",
                    REGION,
                    "--data-dir",
                    str(tmp_path / "coordinator"),
                ],
                env=env,
                stdout=coordinator_log,
                stderr=subprocess.STDOUT,
            )
        try:
            for index, agent_id in enumerate(agent_ids):
                processes[agent_id] = start_agent(
                    settings,
                    agent_id,
                    FIRST_SLOT + index,
                    tmp_path,
                    "--region",
                    REGION,
                    "--capabilities",
                    f"{capability},decision_making",
                    "--brain",
                    "scripted",
                    "--model",
                    str(brain),
                    "--heartbeat-s",
                    str(HEARTBEAT_S),
                )
            await asyncio.to_thread(worker.start)
            await log.wait_for(lambda: all(log.named(AgentEnlisted, agent_id=a) for a in agent_ids), timeout_s=60)
            await submit(settings, mission_id, REGION, [task(f"t{i}", capability) for i in range(TASKS)])

            await log.wait_for(lambda: log.named(TaskStarted, mission_id=mission_id), timeout_s=30)
            held = log.named(TaskStarted, mission_id=mission_id)[0]
            victim = held.agent_id
            processes.pop(victim).send_signal(signal.SIGKILL)
            killed_ms = time.time_ns() // 1_000_000

            events = await eventually(lambda: completed(settings, REGION, mission_id), timeout_s=60)
            await log.wait_for(lambda: log.named(AgentDeclaredDead, agent_id=victim), timeout_s=10)
        finally:
            for process in processes.values():
                process.send_signal(signal.SIGTERM)
            for process in processes.values():
                process.wait(timeout=30)
            if worker.process is not None:
                worker.stop()

    [done] = named(events, MissionCompleted)
    assert (done.success, done.tasks_completed) == (True, TASKS)
    [death] = log.named(AgentDeclaredDead, agent_id=victim)
    [moved] = [e for e in named(events, TaskReassigned) if e.task_id == held.task_id]
    assert (moved.attempt, moved.from_agent_id) == (held.attempt, victim)
    [next_try] = [e for e in named(events, TaskAssigned) if e.task_id == held.task_id and e.attempt == held.attempt + 1]
    assert next_try.agent_id != victim
    results = [e for e in named(events, TaskResultRecorded) if not e.stale]
    assert sorted((e.task_id, e.replica) for e in results) == [(f"t{i}", 0) for i in range(TASKS)]
    assert all(e.succeeded and e.agent_id != victim for e in results if e.task_id == held.task_id)
    last_attempt = {(e.task_id, e.replica): e.attempt for e in results}
    for stale in [e for e in named(events, TaskResultRecorded) if e.stale]:
        assert stale.attempt < last_attempt[stale.task_id, stale.replica]
    detected, reassigned, assigned = (e.occurred_at - killed_ms for e in (death, moved, next_try))
    print(
        f"\nfailover on {settings.broker}: kill -9 → AgentDeclaredDead {detected} ms → TaskReassigned "
        f"{reassigned} ms → TaskAssigned attempt {held.attempt + 1} {assigned} ms "
        f"(liveness timeout {LIVENESS_TIMEOUT_MS} ms, heartbeat {HEARTBEAT_S * 1000:.0f} ms)"
    )
