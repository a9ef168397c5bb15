"""A task's max_tokens through a mission on a real broker (issue #13): from the mission's spec through the journal's
TaskAssigned to the agent's brain, while a task without one runs on the agent's own; each answer records the
temperature and seed it was sampled with."""

from __future__ import annotations

import json
import sys
import uuid
import zlib
from pathlib import Path

import pytest
from coordinator.live import journal, named

from swarmlog.actors.actions import MAX_ACTION_TOKENS
from swarmlog.actors.brains import TEMPERATURE
from swarmlog.client import MissionClient
from swarmlog.schemas.records import MissionCompleted, TaskAssigned, TaskCompleted

sys.path[:0] = [str(Path(__file__).parent / "faults")]
from mission import REGION, crew

pytestmark = pytest.mark.slow


async def test_a_task_s_max_tokens_reaches_the_brain_and_each_answer_records_its_sampling(settings, tmp_path):
    # The scripted brain writes into its answer the max_tokens its generation was given.
    answer = json.dumps({"action": "answer", "content": "allowed {max_tokens}", "confidence": 0.9})
    async with crew(settings, tmp_path, agents=1, brain_ms=20, script=[answer]) as swarm:
        mission_id = f"m-{uuid.uuid4().hex[:8]}"
        tasks = [
            {"task_id": "sized", "prompt": "Say it.", "required_capabilities": [swarm.capability], "max_tokens": 777},
            {"task_id": "plain", "prompt": "Say it.", "required_capabilities": [swarm.capability]},
        ]
        client = MissionClient(settings)
        await client.submit({"mission_id": mission_id, "title": "budgets", "region": REGION, "tasks": tasks})
        ended = await client.wait(mission_id, REGION, timeout_s=120)
        await swarm.log.wait_for(lambda: len(swarm.log.named(TaskCompleted, mission_id=mission_id)) == 2)
    assert isinstance(ended, MissionCompleted), ended
    assigned = {e.task_id: e.max_tokens for e in named(await journal(settings, REGION, mission_id), TaskAssigned)}
    assert assigned == {"sized": 777, "plain": None}
    completed = {e.task_id: e for e in swarm.log.named(TaskCompleted, mission_id=mission_id)}
    assert {task: e.output for task, e in completed.items()} == {
        "sized": "allowed 777",
        "plain": f"allowed {MAX_ACTION_TOKENS}",  # the agent's own: the scripted brain's default
    }
    [agent_id] = {e.agent_id for e in completed.values()}
    assert {(e.temperature, e.seed) for e in completed.values()} == {(TEMPERATURE, zlib.crc32(agent_id.encode()))}
