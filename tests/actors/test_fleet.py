"""`swarmlog fleet`: many scripted agents in one process, sharing its clients and one store, on real brokers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
from agent_harness import Log, publish_control, send_inbox, stop_agent, task_assigned
from rocksdict import Rdict

from swarmlog import topics
from swarmlog.envelope import stamp
from swarmlog.schemas.records import (
    AgentDeregistered,
    AgentHeartbeat,
    AgentRegistered,
    DrainRequested,
    TaskCompleted,
    TaskStarted,
)
from swarmlog.settings import Settings

AGENTS = 12
FIRST_SLOT = 20  # slots given by hand (no coordinator runs here to allocate them): agent n reads 20 + n
TOPICS = (topics.TASK_EVENTS, topics.REGISTRY, topics.HEARTBEATS)


@pytest.fixture
def host() -> str:
    """A fresh host name: its agents are <host>-0 ... <host>-11."""
    return f"fleet-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def fleet(settings: Settings, host: str, tmp_path: Path):
    """Starts `swarmlog fleet` for the test's host (again, after a kill); whatever still runs at the end is killed."""
    script = tmp_path / "brain.json"
    script.write_text(json.dumps({"median_ms": 400, "sigma": 0.3}))
    env = os.environ | {"SWARMLOG_BOOTSTRAP": settings.bootstrap, "SWARMLOG_BROKER": settings.broker}
    processes: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        log = open(tmp_path / "fleet.log", "ab")  # noqa: SIM115 - the child owns it
        command = ["fleet", "--agents", str(AGENTS), "--name", host, "--first-slot", str(FIRST_SLOT)]
        command += ["--brain", "scripted", "--model", str(script)]
        processes.append(
            subprocess.Popen(
                [sys.executable, "-m", "swarmlog", *command, "--data-dir", str(tmp_path), "--heartbeat-s", "0.5"],
                env=env,
                stdout=log,
                stderr=log,
            )
        )
        return processes[-1]

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def slot(settings: Settings, agent_id: str) -> int:
    """The slot the fleet's agent reads."""
    return FIRST_SLOT + int(agent_id.rsplit("-", 1)[1])


def ids(host: str) -> list[str]:
    """The fleet's agent ids."""
    return [f"{host}-{n}" for n in range(AGENTS)]


async def registered(log: Log, host: str, times: int = 1) -> None:
    """Wait until every agent of the host has registered `times` times."""

    def done() -> bool:
        counts = Counter(event.agent_id for event in log.named(AgentRegistered))
        return all(counts[agent_id] >= times for agent_id in ids(host))

    await log.wait_for(done, timeout_s=90)


async def test_a_fleet_survives_kill_9_mid_task_and_every_task_completes_once(settings, host, fleet, tmp_path):
    async with Log(settings, *TOPICS) as log:
        process = fleet()
        await registered(log, host)
        tasks = [
            task_assigned(agent_id, slot(settings, agent_id), "work", task_id=f"t{n}")
            for agent_id in ids(host)
            for n in range(2)
        ]
        for task in tasks:
            await send_inbox(settings, task.slot, task)
        await log.wait_for(lambda: started(log, host) >= 6)
        process.kill()
        process.wait(10)
        process = fleet()
        await registered(log, host, times=2)
        missions = {task.mission_id for task in tasks}
        await log.wait_for(
            lambda: {e.mission_id for e in log.named(TaskCompleted) if e.mission_id in missions} == missions
        )
        assert stop_agent(process) == 0
        await log.wait_for(lambda: {e.agent_id for e in log.named(AgentDeregistered)} >= set(ids(host)))

    completed = Counter((e.mission_id, e.task_id) for e in log.named(TaskCompleted) if e.mission_id in missions)
    assert set(completed.values()) == {1}, completed  # none lost, none done twice
    heartbeating = {e.agent_id for e in log.named(AgentHeartbeat) if e.agent_id.startswith(host)}
    assert heartbeating == set(ids(host))
    store = Rdict(str(tmp_path / f"fleet-{host}"))  # one store for the host, one checkpoint key per agent
    assert sorted(key for key in store.keys()) == sorted(f"checkpoint/{agent_id}" for agent_id in ids(host))  # noqa: SIM118
    store.close()


def started(log: Log, host: str) -> int:
    """How many of the host's agents have started a task."""
    return len({e.agent_id for e in log.named(TaskStarted) if e.agent_id.startswith(host)})


async def test_a_drain_stops_one_agent_of_a_fleet_and_the_others_work_on(settings, host, fleet):
    drained, other = ids(host)[0], ids(host)[1]
    async with Log(settings, *TOPICS) as log:
        process = fleet()
        await registered(log, host)
        await publish_control(settings, stamp(DrainRequested, producer="test-operator", target=drained, reason="test"))
        await log.wait_for(lambda: log.named(AgentDeregistered, agent_id=drained))
        task = task_assigned(other, slot(settings, other), "work")
        await send_inbox(settings, task.slot, task)
        await log.wait_for(lambda: log.named(TaskCompleted, mission_id=task.mission_id))
        assert process.poll() is None  # the host runs on for its other agents
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0
        await log.wait_for(lambda: log.named(AgentDeregistered, agent_id=other))
    assert len(log.named(AgentDeregistered, agent_id=other)) == 1  # at the end, not with the drained one
