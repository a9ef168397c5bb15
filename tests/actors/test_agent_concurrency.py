"""`swarmlog agent --concurrency N` on real brokers with a slow scripted brain: N tasks at once, each started and
closed once, the next only when a place frees, and each recovered on its own after kill -9."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from agent_harness import Log, send_inbox, slot_of, spawner, stop_agent, task_assigned

from swarmlog import topics
from swarmlog.schemas.records import AgentRegistered, TaskAssigned, TaskCompleted, TaskFailed, TaskStarted

TOPICS = (topics.TASK_EVENTS, topics.REGISTRY)
ANSWER = json.dumps({"action": "answer", "content": "ok", "confidence": 1})


@pytest.fixture
def spawn(settings, agent_id, tmp_path):
    """Starts the test's agent with a scripted brain that takes 2 s a generation, 3 tasks at once."""
    model = tmp_path / "slow.json"
    model.write_text(json.dumps({"median_ms": 2_000, "script": [ANSWER]}))
    default = ("--brain", "scripted", "--model", str(model), "--concurrency", "3")
    yield from spawner(settings, agent_id, slot_of(settings, agent_id), tmp_path, default)


def closed(log: Log, mission: str) -> list:
    """The mission's TaskCompleted and TaskFailed: how often its task was closed."""
    return log.named(TaskCompleted, mission_id=mission) + log.named(TaskFailed, mission_id=mission)


def tasks_for(settings, agent_id: str, count: int) -> list[TaskAssigned]:
    """`count` one-step tasks of missions of their own, assigned to the agent on its slot."""
    return [task_assigned(agent_id, slot_of(settings, agent_id), f"Say ok {n}.", max_steps=1) for n in range(count)]


async def started_with(settings, log: Log, spawn, agent_id: str, *commands: TaskAssigned) -> subprocess.Popen:
    """Start the agent, wait for its registration, then put the commands in its inbox in this order."""
    process = spawn()
    await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
    await send_inbox(settings, slot_of(settings, agent_id), *commands)
    return process


async def test_three_tasks_run_at_once_and_a_fourth_waits_for_a_free_place(settings, agent_id, spawn):
    tasks = tasks_for(settings, agent_id, 4)
    async with Log(settings, *TOPICS) as log:
        process = await started_with(settings, log, spawn, agent_id, *tasks)
        await log.wait_for(lambda: all(log.named(TaskCompleted, mission_id=t.mission_id) for t in tasks))
        assert stop_agent(process) == 0

    (registered,) = log.named(AgentRegistered, agent_id=agent_id)
    assert registered.capacity == 3
    started = [log.named(TaskStarted, mission_id=t.mission_id) for t in tasks]
    completed = [closed(log, t.mission_id) for t in tasks]
    assert all(len(events) == 1 for events in started + completed), "a task started or closed twice"
    first, fourth = [(s[0], c[0]) for s, c in zip(started[:3], completed[:3], strict=True)], started[3][0]
    # the first three overlap: each started before any of them closed (the agent's own clock stamps both)
    assert max(s.occurred_at for s, _ in first) <= min(c.occurred_at for _, c in first)
    # the fourth waited for a place: it started once one of the first three closed
    assert fourth.occurred_at >= min(c.occurred_at for _, c in first)


@pytest.mark.kafka_only
async def test_kill_9_with_three_tasks_in_flight_then_restart_closes_each_once(settings, agent_id, spawn):
    tasks = tasks_for(settings, agent_id, 3)
    async with Log(settings, *TOPICS) as log:
        process = await started_with(settings, log, spawn, agent_id, *tasks)
        await log.wait_for(lambda: all(log.named(TaskStarted, mission_id=t.mission_id) for t in tasks))
        process.send_signal(signal.SIGKILL)  # during the 2 s generations
        process.wait(10)
        killed_before_completion = not any(closed(log, t.mission_id) for t in tasks)
        process = spawn()
        await log.wait_for(lambda: all(closed(log, t.mission_id) for t in tasks), timeout_s=60)
        assert stop_agent(process) == 0

    assert killed_before_completion
    for task in tasks:
        assert len(closed(log, task.mission_id)) == 1 and len(log.named(TaskStarted, mission_id=task.mission_id)) == 1


async def test_an_assignment_sent_again_while_its_task_runs_is_not_run_twice(settings, agent_id, spawn):
    task, other = tasks_for(settings, agent_id, 2)
    async with Log(settings, *TOPICS) as log:
        process = await started_with(settings, log, spawn, agent_id, task, task, other)  # an assignment re-sent
        await log.wait_for(lambda: closed(log, task.mission_id) and closed(log, other.mission_id))
        assert stop_agent(process) == 0

    assert len(closed(log, task.mission_id)) == 1 and len(log.named(TaskStarted, mission_id=task.mission_id)) == 1
