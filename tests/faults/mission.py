"""A mission run by real processes (streams worker, `swarmlog coordinator`, scripted `swarmlog agent`s) while a test
does something to the broker, and what the log says happened."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from pathlib import Path

from coordinator.harness import task
from coordinator.live import eventually, journal, named, submit

from swarmlog.kafka.admin import ensure_topics
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentEnlisted, MissionCompleted, TaskResultRecorded
from swarmlog.settings import Settings

sys.path[:0] = [str(Path(__file__).parents[1] / "streams"), str(Path(__file__).parents[1] / "actors")]
from agent_harness import Log, start_agent
from worker_harness import Worker, stop_swarm

REGION = "region-0"


@dataclasses.dataclass
class Crew:
    """The processes of one region and the log they write; `processes` maps a name to its Popen."""

    settings: Settings
    tmp_path: Path
    log: Log
    worker: Worker
    processes: dict[str, subprocess.Popen]
    capability: str

    def running(self, mission_id: str) -> bool:
        """Whether the mission has started and not completed, as the log collected so far shows."""
        return bool(self.log.named(TaskResultRecorded, mission_id=mission_id)) and not self.log.named(
            MissionCompleted, mission_id=mission_id
        )

    def dead(self) -> dict[str, int]:
        """The processes that exited on their own, with their exit codes (the worker's as "streams")."""
        exited = {name: process.returncode for name, process in self.processes.items() if process.poll() is not None}
        if self.worker.process is not None and self.worker.process.poll() is not None:
            exited["streams"] = self.worker.process.returncode
        return exited

    async def run_mission(
        self, tasks: int, fault: Callable[[str], Awaitable[None]], after_results: int, timeout_s: float = 240.0
    ) -> list[Event]:
        """Submit a mission of `tasks` independent tasks, run `fault` once `after_results` results are journaled,
        and return the mission's journal once it has completed."""
        mission_id = f"m-{uuid.uuid4().hex[:8]}"
        await submit(self.settings, mission_id, REGION, [task(f"t{i}", self.capability) for i in range(tasks)])
        await self.log.wait_for(
            lambda: len(self.log.named(TaskResultRecorded, mission_id=mission_id)) >= after_results, timeout_s=120
        )
        await fault(mission_id)
        return await eventually(lambda: _completed(self.settings, mission_id), timeout_s=timeout_s)


async def _completed(settings: Settings, mission_id: str) -> list[Event] | None:
    events = await journal(settings, REGION, mission_id)
    return events if named(events, MissionCompleted) else None


@contextlib.asynccontextmanager
async def crew(
    settings: Settings,
    tmp_path: Path,
    agents: int = 3,
    heartbeat_s: float = 1.0,
    first_slot: int = 40,
    brain_ms: int = 600,
    streams_metrics_port: int = 0,
    env_of: Callable[[str], Mapping[str, str]] = lambda _: {},
    script: Sequence[str] = (),
    brain: Sequence[str] = (),
    enlist_timeout_s: float = 90.0,
) -> AsyncIterator[Crew]:
    """The streams worker (default liveness timeout), `swarmlog coordinator` and `agents` agents (scripted, unless
    `brain` gives the agents' brain options), all enlisted; on exit every process is asked to stop (SIGTERM) and waited
    for, so the coordinator saves its snapshot. `env_of(name)` is added to the environment of "coordinator", "streams"
    and each agent (by its id); `script`, when given, is what the scripted brain replies in turn."""
    await ensure_topics(settings)
    capability = f"faults-{uuid.uuid4().hex[:8]}"
    if not brain:
        scripted = tmp_path / "brain.json"
        scripted.write_text(
            json.dumps({"median_ms": brain_ms, "sigma": 0.2} | ({"script": list(script)} if script else {}))
        )
        brain = ("--brain", "scripted", "--model", str(scripted))
    env = {
        **os.environ,
        "SWARMLOG_BROKER": settings.broker,
        "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
        "SWARMLOG_REPLICATION_FACTOR": str(settings.replication_factor),
    }  # topics a process creates replicate too
    worker = Worker(settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "streams")
    worker.env.update(
        SWARMLOG_METRICS_PORT=str(streams_metrics_port), SWARMLOG_REPLICATION_FACTOR=str(settings.replication_factor)
    )
    worker.env.update(env_of("streams"))
    processes: dict[str, subprocess.Popen] = {}
    agent_ids = [f"{capability}-{index}" for index in range(agents)]
    async with Log(settings, "swarm.agents.registry", "swarm.coordinator.journal", "swarm.tasks.events") as log:
        try:
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
                    env=env | dict(env_of("coordinator")),
                    stdout=coordinator_log,
                    stderr=subprocess.STDOUT,
                )
            for index, agent_id in enumerate(agent_ids):
                processes[agent_id] = start_agent(
                    settings,
                    agent_id,
                    first_slot + index,
                    tmp_path,
                    "--region",
                    REGION,
                    "--capabilities",
                    f"{capability},decision_making",
                    *brain,
                    "--heartbeat-s",
                    str(heartbeat_s),
                    env=env_of(agent_id),
                )
            await asyncio.to_thread(worker.start)
            await log.wait_for(
                lambda: all(log.named(AgentEnlisted, agent_id=a) for a in agent_ids), timeout_s=enlist_timeout_s
            )
            yield Crew(settings, tmp_path, log, worker, processes, capability)
        finally:
            stop_swarm(processes.values(), worker)


def results_once(events: list[Event], tasks: int) -> None:
    """Assert every task's result is journaled once: one non-stale TaskResultRecorded per (task, replica), and no
    (task, replica, attempt) recorded twice, stale or not."""
    recorded = named(events, TaskResultRecorded)
    per_attempt = collections.Counter((e.task_id, e.replica, e.attempt) for e in recorded)
    assert not [key for key, count in per_attempt.items() if count > 1], f"journaled twice: {per_attempt}"
    current = sorted((e.task_id, e.replica) for e in recorded if not e.stale)
    assert current == sorted((f"t{i}", 0) for i in range(tasks)), f"results: {current}"
    [done] = named(events, MissionCompleted)
    assert (done.success, done.tasks_completed) == (True, tasks)
