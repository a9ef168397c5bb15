"""A mission on one agent started with concurrency 3 (issue #13): the coordinator routes it three tasks at once, the
agent runs them at overlapping times, and the mission completes with nothing doubled."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest
from coordinator.live import journal, named

from swarmlog.client import MissionClient
from swarmlog.schemas.records import (
    AgentEnlisted,
    MissionCompleted,
    TaskAssigned,
    TaskCompleted,
    TaskResultRecorded,
    TaskStarted,
)

sys.path[:0] = [str(Path(__file__).parent / "faults")]
from mission import REGION, crew

pytestmark = pytest.mark.kafka_only
WORK = ("a", "b", "c")


async def test_one_agent_with_concurrency_3_runs_a_mission_s_three_tasks_at_once(settings, tmp_path):
    env = {"SWARMLOG_CONCURRENCY": "3"}  # the option's environment variable
    async with crew(settings, tmp_path, agents=1, brain_ms=2_000, env_of=lambda _: env) as swarm:
        mission_id = f"m-{uuid.uuid4().hex[:8]}"
        mission = {
            "mission_id": mission_id,
            "title": "three at once",
            "region": REGION,
            "tasks": [
                {"task_id": task_id, "prompt": f"Do {task_id}.", "required_capabilities": [swarm.capability]}
                for task_id in WORK
            ],
            "final_action": {"prompt": "Sum it up.", "required_capabilities": ["decision_making"]},
        }
        client = MissionClient(settings)
        await client.submit(mission)
        ended = await client.wait(mission_id, REGION, timeout_s=180)
        await swarm.log.wait_for(lambda: len(swarm.log.named(TaskCompleted, mission_id=mission_id)) == 4)
    assert isinstance(ended, MissionCompleted), ended
    events = await journal(settings, REGION, mission_id)
    [enlisted] = [e for e in swarm.log.named(AgentEnlisted) if e.agent_id.startswith(swarm.capability)][-1:]
    assert enlisted.capacity == 3
    assigned = [e for e in named(events, TaskAssigned) if e.task_id in WORK]
    assert sorted(e.task_id for e in assigned) == sorted(WORK), "a task was assigned twice"
    started = {e.task_id: e for e in swarm.log.named(TaskStarted, mission_id=mission_id) if e.task_id in WORK}
    completed = [e for e in swarm.log.named(TaskCompleted, mission_id=mission_id) if e.task_id in WORK]
    assert len(completed) == len(WORK) and {e.task_id for e in completed} == set(WORK), "a result was doubled"
    # overlapping: every work task started (the agent's clock) before the first of them completed
    assert max(e.occurred_at for e in started.values()) <= min(e.occurred_at for e in completed)
    results = [e for e in named(events, TaskResultRecorded) if e.task_id in WORK and not e.stale]
    assert sorted(e.task_id for e in results) == sorted(WORK), "a result was journaled twice"
