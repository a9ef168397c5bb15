"""Re-sync: an agent works from the latest ground truth it re-read, on demand and on its period (scripted brain)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from agent_harness import Log, addressee, send_inbox, start_agent, stop_agent, task_assigned

from swarmlog import topics
from swarmlog.actors.groundtruth import GroundTruth, evolve_ground_truth
from swarmlog.actors.prompts import task_prompt
from swarmlog.envelope import stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentRegistered, GroundTruthUpdated, ResyncRequested, TaskStarted
from swarmlog.settings import Settings

TOPICS = (topics.TASK_EVENTS, topics.REGISTRY)


def updated(document_id: str, version: int, content: str = "the release is on Tuesday") -> Event:
    return stamp(GroundTruthUpdated, producer="operator", document_id=document_id, version=version, content=content)


def test_only_a_newer_version_of_the_agent_s_own_document_replaces_what_it_holds():
    truth = GroundTruth("plan")
    for event in (updated("plan", 2, "v2"), updated("other", 9, "x"), updated("plan", 1, "v1")):
        truth = evolve_ground_truth(truth, event)
    assert (truth.version, truth.content) == (2, "v2")
    assert "Ground truth (plan, version 2): v2" in task_prompt("do it", {}, truth=truth)
    assert "Ground truth" not in task_prompt("do it", {}, truth=GroundTruth("plan"))


async def publish(settings: Settings, *events: Event) -> None:
    """An operator publishes ground truth or asks agents to re-sync."""
    async with EventProducer(settings, client_id="test-operator") as producer:
        for event in events:
            if isinstance(event, GroundTruthUpdated):
                await producer.send(topics.GROUND_TRUTH, event, key=event.document_id)
            else:
                await producer.send(topics.CONTROL, event, key=addressee(event))


async def versions_started(settings: Settings, log: Log, agent_id: str, slot: int, count: int) -> list[int | None]:
    """Assign the agent one more task; the ground-truth versions of its TaskStarted events once there are `count`."""
    await send_inbox(settings, slot, task_assigned(agent_id, slot, "Say ok.", max_steps=1))
    await log.wait_for(lambda: len(log.named(TaskStarted, agent_id=agent_id)) >= count, timeout_s=30)
    return [e.ground_truth_version for e in log.named(TaskStarted, agent_id=agent_id)]


@pytest.mark.parametrize("resync_s", [600, 1])
async def test_a_task_started_after_a_resync_works_from_the_new_version(settings: Settings, tmp_path, resync_s):
    agent_id, document, slot = f"truth-{uuid.uuid4().hex[:8]}", f"doc-{uuid.uuid4().hex[:8]}", 50 + resync_s % 7
    await publish(settings, updated(document, 1))
    async with Log(settings, *TOPICS) as log:
        process = start_agent(
            settings,
            agent_id,
            slot,
            tmp_path,
            "--brain",
            "scripted",
            "--ground-truth",
            document,
            "--resync-s",
            str(resync_s),
        )
        try:
            await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
            assert await versions_started(settings, log, agent_id, slot, 1) == [1]  # read before registering
            await publish(settings, updated(document, 2))
            if resync_s > 60:  # no period soon: only a ResyncRequested brings version 2
                await publish(
                    settings, stamp(ResyncRequested, producer="operator", target=agent_id, ground_truth_version=2)
                )
            found = [1]
            for _ in range(20):  # a task every 0.5 s until one starts on version 2 (at most 10 s)
                await asyncio.sleep(0.5)
                found = await versions_started(settings, log, agent_id, slot, len(found) + 1)
                if found[-1] == 2:
                    break
            assert found[-1] == 2 and set(found) == {1, 2}
        finally:
            assert stop_agent(process) == 0
