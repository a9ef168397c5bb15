"""An agent declared dead while it runs hands back its task and registers again (scripted brain, real brokers)."""

from __future__ import annotations

import json

import pytest
from agent_harness import Log, send_inbox, slot_of, spawner, stop_agent, task_assigned

from swarmlog import topics
from swarmlog.actors.domain import declared_dead
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentHeartbeat,
    AgentRegistered,
    TaskCompleted,
    TaskReleased,
    TaskStarted,
    from_fields,
)
from swarmlog.settings import Settings
from swarmlog.streams.registry import DEFAULT_TIMEOUT_MS, INITIAL, Registry, decide_liveness, evolve_all
from swarmlog.streams.registry import agent_of as registry_agent_of

TOPICS = (topics.TASK_EVENTS, topics.REGISTRY, topics.HEARTBEATS)


@pytest.fixture
def spawn(settings, agent_id, tmp_path):
    """Starts the test's agent with a scripted brain that takes ~1 s a step; kills what is left at the end."""
    model = tmp_path / "slow.json"
    model.write_text(
        json.dumps(
            {
                "median_ms": 1_000,
                "script": [json.dumps({"action": "recall", "content": "logs", "confidence": 1})] * 4
                + [json.dumps({"action": "answer", "content": "ok", "confidence": 1})],
            }
        )
    )
    yield from spawner(
        settings, agent_id, slot_of(settings, agent_id), tmp_path, ("--brain", "scripted", "--model", str(model))
    )


def registry_of(log: Log, agent_id: str) -> Registry:
    """The registry as the streams worker folds it from the agent's registry facts and heartbeats in the log."""
    return evolve_all(INITIAL, [e for e in log.events if registry_agent_of(e) == agent_id])


async def declare_dead(settings: Settings, log: Log, agent_id: str) -> Event:
    """The AgentDeclaredDead the streams worker would decide for the agent's current run once its heartbeats stopped,
    written as it writes it: to the registry, keyed by the agent."""
    registry = registry_of(log, agent_id)
    silent_ms = registry.agents[agent_id].last_heartbeat_ms + DEFAULT_TIMEOUT_MS + 1
    (death,) = decide_liveness(registry, silent_ms)
    async with EventProducer(settings, client_id="test-streams") as producer:
        await producer.send(topics.REGISTRY, death, key=agent_id)
    return death


def test_only_a_death_of_this_run_of_this_agent_counts():
    def death(agent_id: str, registration_id: str) -> Event:
        fields = {"agent_id": agent_id, "registration_id": registration_id, "last_heartbeat_at": 0, "timeout_ms": 1}
        return from_fields("AgentDeclaredDead", {"event_id": "d", "occurred_at": 1, "producer": "streams", **fields})

    assert declared_dead(death("a1", "r2"), "a1", "r2")
    assert not declared_dead(death("a1", "r1"), "a1", "r2")  # an older run's death
    assert not declared_dead(death("a2", "r2"), "a1", "r2")
    left = {"event_id": "r2", "occurred_at": 1, "producer": "agent:a1", "agent_id": "a1", "reason": "stopped"}
    assert not declared_dead(from_fields("AgentDeregistered", left), "a1", "r2")


async def test_an_agent_declared_dead_while_alive_hands_back_its_task_and_is_listed_alive_again(
    settings, agent_id, spawn, tmp_path
):
    slot = slot_of(settings, agent_id)
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=5)
    mission = task.mission_id
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id))
        (first,) = log.named(AgentRegistered, agent_id=agent_id)
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: log.named(TaskStarted, mission_id=mission))
        await log.wait_for(lambda: log.named(AgentHeartbeat, registration_id=first.event_id, status="BUSY"))
        death = await declare_dead(settings, log, agent_id)
        await log.wait_for(lambda: len(log.named(AgentRegistered, agent_id=agent_id)) == 2)
        second = log.named(AgentRegistered, agent_id=agent_id)[1]
        await log.wait_for(lambda: log.named(TaskReleased, mission_id=mission))
        await log.wait_for(lambda: log.named(AgentHeartbeat, registration_id=second.event_id, status="IDLE"))
        after = task_assigned(agent_id, slot, "Say ok again.", max_steps=5)  # the new run takes work
        await send_inbox(settings, slot, after)
        await log.wait_for(lambda: log.named(TaskCompleted, mission_id=after.mission_id), timeout_s=30)
        view = registry_of(log, agent_id).agents[agent_id]
        assert stop_agent(process) == 0

    assert death.registration_id == first.event_id != second.event_id
    (released,) = log.named(TaskReleased, mission_id=mission)
    assert "declared dead" in released.reason and not log.named(TaskCompleted, mission_id=mission)
    assert view.alive and view.registration_id == second.event_id
    agent_log = (tmp_path / f"{agent_id}.log").read_text()
    assert f"agent {agent_id} was declared dead while running (registration {first.event_id}" in agent_log
