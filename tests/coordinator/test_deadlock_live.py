"""A deadlock of real agents: three `swarmlog agent` processes ask each other in a ring while each holds a task.

Each agent's scripted brain asks the next agent of the ring at its task's first step, and answers after that. Each
question waits behind its recipient's own task, so the waits form the cycle a → b → c → a. The Faust streams worker
detects it (DeadlockDetected on swarm.alerts), the coordinator aborts the youngest wait (DeadlockBroken, an error
answer to its waiter), and the ring unwinds: the released agent finishes, answers its asker, and so on round.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import pytest

from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.kafka.admin import ensure_topics
from swarmlog.schemas.records import AgentRegistered, DeadlockBroken, DeadlockDetected, MissionCompleted, WaitEnded
from swarmlog.settings import Settings
from swarmlog.topics import ALERTS, REGISTRY, WAITS

from .harness import task
from .live import eventually, named, submit
from .test_shell import completed

sys.path[:0] = [str(Path(__file__).parents[1] / "streams"), str(Path(__file__).parents[1] / "actors")]
from agent_harness import Log, start_agent, stop_agent
from worker_harness import Worker

pytestmark = pytest.mark.slow
REGION, FIRST_SLOT = "region-0", 44
ANSWER = {"action": "answer", "content": "done", "confidence": 1.0}


def brain(path: Path, asks: str) -> Path:
    """A scripted brain that asks `asks` once, then answers everything."""
    path.write_text(
        json.dumps(
            {
                "script": [json.dumps({"action": "ask", "content": "ready?", "confidence": 1.0, "target": asks})]
                + [json.dumps(ANSWER)] * 5,
                "median_ms": 300,
                "sigma": 0.0,
            }
        )
    )
    return path


async def test_three_agents_asking_each_other_in_a_ring_deadlock_and_the_coordinator_breaks_it(
    settings: Settings, tmp_path: Path
):
    await ensure_topics(settings)
    ring = [f"ring-{uuid.uuid4().hex[:6]}-{name}" for name in "abc"]
    mission_id = f"m-{uuid.uuid4().hex[:8]}"
    worker = Worker(settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "streams")
    processes = []
    async with Log(settings, ALERTS, WAITS, REGISTRY) as log:
        await asyncio.to_thread(worker.start)
        try:
            for index, agent_id in enumerate(ring):
                asks = ring[(index + 1) % len(ring)]
                processes.append(
                    start_agent(
                        settings,
                        agent_id,
                        FIRST_SLOT + index,
                        tmp_path,
                        "--region",
                        REGION,
                        "--capabilities",
                        f"{agent_id},decision_making",
                        "--brain",
                        "scripted",
                        "--model",
                        str(brain(tmp_path / f"{agent_id}.json", asks)),
                        "--ask-peers",
                        "--ask-timeout-s",
                        "90",
                    )
                )
            await log.wait_for(lambda: all(log.named(AgentRegistered, agent_id=a) for a in ring), timeout_s=60)
            async with CoordinatorService(settings, REGION, data_dir=tmp_path / "coordinator"):
                await submit(settings, mission_id, REGION, [task(f"t-{a}", a) for a in ring])
                events = await eventually(lambda: completed(settings, REGION, mission_id), timeout_s=90)
            await log.wait_for(lambda: len(ended(log, ring)) == len(ring), timeout_s=30)
        finally:
            for process in processes:
                stop_agent(process)
            if worker.process is not None:
                worker.stop()

    [detected] = [e for e in log.named(DeadlockDetected) if set(e.cycle) == set(ring)]
    cycle = list(detected.cycle)
    assert cycle[cycle.index(ring[0]) :] + cycle[: cycle.index(ring[0])] == ring, "a waits for b, b for c, c for a"
    [broken] = named(events, DeadlockBroken)
    assert broken.wait_id in detected.wait_ids
    outcomes = {e.waiter_agent_id: e.outcome for e in ended(log, ring)}
    assert outcomes == {agent_id: "ABORTED" if agent_id == broken.waiter_agent_id else "ANSWERED" for agent_id in ring}
    [done] = named(events, MissionCompleted)
    assert done.success and done.tasks_completed == len(ring)


def ended(log: Log, ring: list[str]) -> list:
    """The WaitEnded events of the ring's agents."""
    return [e for e in log.named(WaitEnded) if e.waiter_agent_id in ring]
