"""The integration tier on containers: Kafka, Redis and every swarmlog process run from the images built here.

A three-phase mission (parallel work, consensus, a final decision) runs on the streams worker, a coordinator and
three scripted agents, each its own container of the swarmlog image. The coordinator's container is killed with -9
once work has started and started again; an agent's container is killed with -9 while it holds a task and stays
dead. The mission completes, every task's result is journaled once, the dead agent's task moves to another agent,
and the coordinator's live state equals its replay.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from coordinator.harness import task

from swarmlog.client import MissionClient
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentRegistered,
    MissionCompleted,
    TaskCompleted,
    TaskReassigned,
    TaskResultRecorded,
    TaskStarted,
)
from swarmlog.services import Services, images, open_services
from swarmlog.services.docker import docker_available
from swarmlog.settings import Settings
from swarmlog.topics import JOURNAL, REGISTRY, TASK_EVENTS

from .harness import Containers

AVAILABLE, WHY_NOT = docker_available()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)]
REGION, AGENTS = "region-0", 3
BRAIN = {"median_ms": 2000, "sigma": 0.2, "answers": 2}


@pytest.fixture(scope="module")
def services() -> Iterator[Services]:
    """Kafka and Redis containers of the images built here, for this module."""
    settings = dataclasses.replace(Settings.from_env(), broker="docker", bootstrap=None, redis_url=None, images="local")
    with open_services(settings) as started:
        yield started


@pytest.fixture
def container_settings(services: Services, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Settings on the containers; the environment every container is given (liveness within 3 s)."""
    monkeypatch.setenv("SWARMLOG_STREAMS_APP_ID", f"streams-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("SWARMLOG_STREAMS_DATA_DIR", str(tmp_path / "streams"))
    monkeypatch.setenv("SWARMLOG_STREAMS_LIVENESS_TIMEOUT_MS", "3000")
    return dataclasses.replace(
        Settings.from_env(), broker="docker", bootstrap=services.broker.bootstrap, redis_url=services.redis.url
    )


def registered(log: Collector) -> set[str]:
    """The agents that have registered."""
    return {event.agent_id for event in log.named(AgentRegistered)}


def story(log: Collector, mission_id: str) -> str:
    """The mission's events, one line each, for a failure's message."""
    return "\n".join(
        f"{type(e).__name__} {getattr(e, 'task_id', '')} {getattr(e, 'replica', '')} {getattr(e, 'agent_id', '')}"
        for e in log.events
        if getattr(e, "mission_id", None) == mission_id or isinstance(e, AgentDeclaredDead)
    )


def held_by(log: Collector, agent_id: str) -> bool:
    """Whether the agent has started an attempt that it has not completed."""
    started = {(e.task_id, e.replica, e.attempt) for e in log.named(TaskStarted) if e.agent_id == agent_id}
    done = {(e.task_id, e.replica, e.attempt) for e in log.named(TaskCompleted) if e.agent_id == agent_id}
    return bool(started - done)


@pytest.mark.timeout(900)  # the swarmlog image is built first when its sources changed (minutes)
async def test_a_three_phase_mission_survives_kill_9_of_the_coordinator_s_and_an_agent_s_container(
    container_settings: Settings, tmp_path: Path
) -> None:
    settings = container_settings
    await ensure_topics(settings)
    image = images.ensure(["swarmlog"], settings.cache_dir)["swarmlog"]
    capability, mission_id = f"boxed-{uuid.uuid4().hex[:8]}", f"boxed-{uuid.uuid4().hex[:8]}"
    brain = tmp_path / "brain.json"
    brain.write_text(json.dumps(BRAIN))
    agents = [f"{capability}-{n}" for n in range(AGENTS)]
    boxes = Containers(settings, image, tmp_path)
    async with Collector(settings, JOURNAL, TASK_EVENTS, REGISTRY) as log:
        try:
            boxes.start("streams", "streams")
            boxes.start("coordinator", "coordinator", "--region", REGION, "--data-dir", str(tmp_path / "coordinator"))
            for agent in agents:
                boxes.start(
                    agent,
                    *("agent", agent, "--capabilities", f"{capability},decision_making", "--region", REGION),
                    *("--brain", "scripted", "--model", str(brain), "--data-dir", str(tmp_path / "agents")),
                )
            await log.wait_for(lambda: set(agents) <= registered(log) or boxes.check(), 120)
            mission = {
                "mission_id": mission_id,
                "title": "in containers",
                "region": REGION,
                "tasks": [task(f"t{i}", capability, replicas=2) for i in range(4)],
                "consensus": {"strategy": "MAJORITY", "window_ms": 30_000, "quorum": 0.5},
                "final_action": {"prompt": "ship or hold", "required_capabilities": [capability]},
            }
            assert await MissionClient(settings).submit(mission) == mission_id

            await log.wait_for(lambda: bool(log.named(TaskStarted)) or boxes.check(), 60)
            boxes.kill("coordinator")
            boxes.restart("coordinator")
            await log.wait_for(lambda: any(held_by(log, agent) for agent in agents), 60)
            victim = next(agent for agent in agents if held_by(log, agent))
            boxes.kill(victim)
            try:
                await log.wait_for(lambda: log.named(MissionCompleted, mission_id=mission_id) or boxes.check(), 240)
            except TimeoutError:
                raise AssertionError(f"the mission did not end; its events:\n{story(log, mission_id)}") from None
        finally:
            boxes.stop_all()  # SIGTERM: the coordinator writes its snapshot

    [done] = log.named(MissionCompleted, mission_id=mission_id)
    assert done.success, done
    recorded = collections.Counter(
        (e.task_id, e.replica) for e in log.named(TaskResultRecorded) if e.mission_id == mission_id and not e.stale
    )
    assert {(f"t{i}", r) for i in range(4) for r in range(2)} <= set(recorded), recorded  # nothing lost
    assert all(count == 1 for count in recorded.values()), recorded  # nothing doubled
    assert victim in {e.agent_id for e in log.named(AgentDeclaredDead)}
    assert any(e.mission_id == mission_id for e in log.named(TaskReassigned))  # the dead agent's task moved
    verify = ["replay", "verify", "coordinator", "--key", REGION, "--data-dir", str(tmp_path / "coordinator")]
    verified = subprocess.run(
        [sys.executable, "-m", "swarmlog", *verify, "--bootstrap", settings.bootstrap or "", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
    [live] = json.loads(verified.stdout)["live"]
    assert live["differences"] == 0 and live["live"], live  # replay equals the live state
