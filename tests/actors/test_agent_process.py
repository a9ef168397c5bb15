"""`swarmlog agent` on real brokers with the llama.cpp brain: tasks, heartbeats, poison records, kill -9."""

from __future__ import annotations

import importlib.util
import itertools
import json
import signal

import pytest
from agent_harness import Log, send_inbox, slot_of, spawner, stop_agent, task_assigned

from swarmlog import topics
from swarmlog.actors.actions import parse_action
from swarmlog.schemas.records import (
    AgentDeregistered,
    AgentHeartbeat,
    AgentRegistered,
    DeadLetterRecorded,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    TaskStepTaken,
    TokensUsed,
)

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: pip install 'swarmlog[llamacpp]'",
)
TOPICS = (topics.TASK_EVENTS, topics.REGISTRY, topics.HEARTBEATS, topics.USAGE, topics.DEAD_LETTERS)


@pytest.fixture
def spawn(settings, agent_id, tmp_path):
    """Starts the test's agent process (again, after a kill); whatever still runs at teardown is killed."""
    yield from spawner(settings, agent_id, slot_of(settings, agent_id), tmp_path)


async def started(spawn, log, agent_id, *extra):
    """A running agent that has registered."""
    process = spawn(*extra)
    await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
    return process


async def test_an_assigned_task_is_started_and_completed_from_valid_action_json(settings, agent_id, spawn):
    async with Log(settings, *TOPICS) as log:
        process = await started(spawn, log, agent_id)
        task = task_assigned(agent_id, slot_of(settings, agent_id), "What is 2+2? Answer with the number.")
        await send_inbox(settings, slot_of(settings, agent_id), task)
        mission = task.mission_id
        await log.wait_for(lambda: log.named(TaskCompleted, mission_id=mission))
        assert stop_agent(process) == 0
        await log.wait_for(lambda: log.named(AgentDeregistered, agent_id=agent_id))

    (completed,) = log.named(TaskCompleted, mission_id=mission)
    assert len(log.named(TaskStarted, mission_id=mission)) == 1
    answer = log.named(TaskStepTaken, mission_id=mission, action="ANSWER")[-1]
    assert completed.output == answer.content
    assert completed.prompt_tokens > 0 and completed.completion_tokens > 0
    assert log.named(TokensUsed, task_id="t1", mission_id=mission)


@pytest.mark.slow
@pytest.mark.kafka_only
async def test_twenty_tasks_in_a_row_are_never_malformed(settings, agent_id, spawn):
    prompts = [
        "What is 2+2?",
        "Name a colour.",
        "Give a synonym of fast.",
        "What is the capital of France?",
        "Summarise: Kafka keeps an ordered log.",
    ] * 4
    slot = slot_of(settings, agent_id)
    tasks = [task_assigned(agent_id, slot, prompt) for prompt in prompts]
    async with Log(settings, *TOPICS) as log:
        process = await started(spawn, log, agent_id)
        await send_inbox(settings, slot, *tasks)
        missions = {t.mission_id for t in tasks}
        closed = lambda: log.named(TaskCompleted, TaskFailed, agent_id=agent_id)
        await log.wait_for(lambda: len(closed()) >= len(tasks), timeout_s=240)
        stop_agent(process)

    assert {e.mission_id for e in closed()} == missions
    assert [e.detail for e in log.named(TaskFailed, agent_id=agent_id) if e.failure == "MALFORMED_OUTPUT"] == []


async def test_heartbeats_keep_their_period_while_the_model_generates(settings, agent_id, spawn):
    slot = slot_of(settings, agent_id)
    async with Log(settings, *TOPICS) as log:
        process = await started(spawn, log, agent_id, "--heartbeat-s", "0.5")
        tasks = [task_assigned(agent_id, slot, "Write two sentences about logs.", max_steps=3) for _ in range(4)]
        await send_inbox(settings, slot, *tasks)
        await log.wait_for(
            lambda: (
                len(log.named(TaskCompleted, agent_id=agent_id)) + len(log.named(TaskFailed, agent_id=agent_id)) >= 4
            ),
            timeout_s=120,
        )
        stop_agent(process)

    beats = sorted(log.named(AgentHeartbeat, agent_id=agent_id), key=lambda e: e.sequence)
    busy = [(a, b) for a, b in itertools.pairwise(beats) if "BUSY" in (a.status, b.status)]
    assert len(busy) >= 3, [b.status for b in beats]
    gaps = [b.occurred_at - a.occurred_at for a, b in busy]
    assert all(250 <= gap <= 1_000 for gap in gaps), gaps  # a mechanism bound: a stalled loop misses seconds, not ms


async def test_a_poison_record_is_dead_lettered_and_the_agent_goes_on(settings, agent_id, spawn):
    slot = slot_of(settings, agent_id)
    async with Log(settings, *TOPICS) as log:
        process = await started(spawn, log, agent_id)
        first = await send_inbox(settings, slot, raw=b"not an avro record")  # keyless: the slot's agent's to handle
        task = task_assigned(agent_id, slot, "What is 3+3?")
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: log.named(TaskCompleted, mission_id=task.mission_id))
        stop_agent(process)

    poisoned = [
        e
        for e in log.named(DeadLetterRecorded, origin_topic="swarm.agents.inbox", origin_partition=slot)
        if e.consumer == f"agent:{agent_id}" and e.origin_offset >= (first or 0)  # not other tests' garbage in the slot
    ]
    assert [e.payload for e in poisoned] == [b"not an avro record"]


async def test_kill_9_mid_task_then_restart_completes_the_task_exactly_once(settings, agent_id, spawn):
    slot = slot_of(settings, agent_id)
    task = task_assigned(agent_id, slot, "Write a short paragraph about event logs.", max_steps=3)
    mission = task.mission_id
    async with Log(settings, *TOPICS) as log:
        process = await started(spawn, log, agent_id)
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: log.named(TaskStarted, mission_id=mission))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        killed_before_completion = not log.named(TaskCompleted, mission_id=mission)
        restarted = spawn()
        await log.wait_for(lambda: len(log.named(AgentRegistered, agent_id=agent_id)) == 2)
        await log.wait_for(
            lambda: log.named(TaskCompleted, mission_id=mission) or log.named(TaskFailed, mission_id=mission)
        )
        extra = task_assigned(agent_id, slot, "What is 1+1?")  # a later task proves the agent moved past it
        await send_inbox(settings, slot, extra)
        await log.wait_for(lambda: log.named(TaskCompleted, mission_id=extra.mission_id))
        assert stop_agent(restarted) == 0

    closed = log.named(TaskCompleted, mission_id=mission) + log.named(TaskFailed, mission_id=mission)
    assert killed_before_completion
    assert len(closed) == 1 and len(log.named(TaskStarted, mission_id=mission)) == 1
    if isinstance(closed[0], TaskCompleted):
        assert parse_action(json.dumps({"action": "answer", "content": closed[0].output, "confidence": 1}))
