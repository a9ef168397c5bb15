"""The top level live: `swarmlog top` splits a 40-task mission across two regions' coordinators (real processes) and
their scripted agents, survives its own kill -9, and moves the share of a region whose coordinator is killed -9."""

from __future__ import annotations

import collections
import dataclasses
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from swarmlog.client import MissionClient
from swarmlog.coordinator.announcements import served
from swarmlog.coordinator.shell.announce import read_announcements
from swarmlog.coordinator.shell.top import TopService
from swarmlog.envelope import now_ms
from swarmlog.schemas.records import (
    FinalSharePlaced,
    MissionCompleted,
    MissionRejected,
    MissionSplit,
    ShareCompleted,
    ShareMoved,
    TaskResultRecorded,
)
from swarmlog.settings import Settings

from .harness import named, task
from .live import Processes, ScriptedAgent, ended, eventually, journal, serving, top_journal

pytestmark = pytest.mark.slow
REGIONS = ("region-0", "region-1")
AGENTS, TASKS = 4, 40


@pytest.fixture
def processes(own_settings: Settings, tmp_path: Path) -> Iterator[Processes]:
    started = Processes(own_settings, tmp_path)
    try:
        yield started
    finally:
        started.stop_all()


def agents(settings: Settings, capability: str, latency_s: float = 0.05) -> list[ScriptedAgent]:
    """AGENTS scripted agents per region, on slots of their own, all able to run the test's tasks."""
    return [
        ScriptedAgent(
            settings, f"{capability}-{region}-{index}", slot, region, [capability, "decision_making"], latency_s
        )
        for slot, (region, index) in enumerate((region, index) for region in REGIONS for index in range(AGENTS))
    ]


async def submit_top(settings: Settings, mission_id: str, tasks: list[dict[str, object]], capability: str) -> None:
    """A client submits the mission to the top level, with a final action only the test's agents can run."""
    mission = {"mission_id": mission_id, "title": mission_id, "region": "top", "tasks": tasks}
    final_action = {"prompt": "sum up", "required_capabilities": [capability]}
    assert await MissionClient(settings).submit(mission | {"final_action": final_action}) == mission_id


def start_regions(processes: Processes, tmp_path: Path) -> None:
    for region in REGIONS:
        processes.start(region, "coordinator", "--region", region, "--data-dir", str(tmp_path / region))


async def ready(settings: Settings, idle: int) -> bool:
    """Whether both regions are served, each announcing at least `idle` idle agents."""
    latest = await read_announcements(settings)
    return served(latest, REGIONS, now_ms()) == REGIONS and all(latest[r].idle_agents >= idle for r in REGIONS)


async def results_once(settings: Settings, sub_mission_ids: list[str]) -> collections.Counter[str]:
    """How often each task's result was recorded (not stale) across the given sub-missions, in every region."""
    counts: collections.Counter[str] = collections.Counter()
    for region in REGIONS:
        for sub_mission_id in sub_mission_ids:
            recorded = named(await journal(settings, region, sub_mission_id), TaskResultRecorded)
            counts.update(e.task_id for e in recorded if not e.stale and e.mission_id == sub_mission_id)
    return counts


@pytest.mark.kafka_only  # the 20/20 split needs the top to have read both regions' latest announcements when the
# mission comes; on Tansu, whose fetches answer only when their wait is over, it saw one region in CI (a 40/0 split)
async def test_a_40_task_mission_is_split_across_two_regions_and_completes_through_a_top_kill_9(
    own_settings: Settings, processes: Processes, tmp_path: Path
):
    settings = own_settings
    mission_id, capability = f"big-{uuid.uuid4().hex[:8]}", f"top-{uuid.uuid4().hex[:8]}"
    async with serving(agents(settings, capability)):
        start_regions(processes, tmp_path)
        processes.start("top", "top")
        await eventually(lambda: ready(settings, AGENTS), timeout_s=60)
        tasks = [task(f"t{i}", capability, depends_on=[f"t{i - 1}"] if i % 4 else []) for i in range(TASKS)]
        await submit_top(settings, mission_id, tasks, capability)

        [split] = named(await eventually(lambda: top_journal(settings, mission_id)), MissionSplit)
        processes.kill("top")  # right after its split: the sub-missions may or may not have been written
        processes.start("top-again", "top")
        events = await eventually(lambda: ended(settings, mission_id), timeout_s=120)

    assert sorted((share.region, len(share.task_ids)) for share in split.shares) == [("region-0", 20), ("region-1", 20)]
    for share in split.shares:  # the chains t0-t3, t4-t7, ... stay whole
        chains = {int(task_id[1:]) // 4 for task_id in share.task_ids}
        assert sorted(share.task_ids) == sorted(f"t{i}" for chain in chains for i in range(4 * chain, 4 * chain + 4))
    assert [type(e) for e in events].count(MissionSplit) == 1
    assert sorted(e.share_id for e in named(events, ShareCompleted)) == ["final", "s0", "s1"]
    [final] = named(events, FinalSharePlaced)
    [done] = named(events, MissionCompleted)
    assert done.success and done.tasks_completed == TASKS + 1
    counts = await results_once(settings, [f"{mission_id}/s0", f"{mission_id}/s1", f"{mission_id}/final"])
    assert counts == collections.Counter({**{f"t{i}": 1 for i in range(TASKS)}, "final": 1})
    assert final.region in REGIONS
    replayed = json.loads(processes.run("replay", "state", "top", "--key", mission_id, "--json"))["state"]
    mission = replayed[f"missions/{mission_id}"]
    assert sorted(mission["shares"]) == ["final", "s0", "s1"] and mission["ended"]["success"] is True


@pytest.mark.kafka_only  # what moves a share is the announcements' silence, the same on both brokers
async def test_the_share_of_a_killed_region_moves_and_the_mission_completes(
    own_settings: Settings, processes: Processes, tmp_path: Path
):
    settings = own_settings
    mission_id, capability = f"moved-{uuid.uuid4().hex[:8]}", f"top-{uuid.uuid4().hex[:8]}"
    async with serving(agents(settings, capability, latency_s=1.0)):
        start_regions(processes, tmp_path)
        processes.start("top", "top", "--move-after-ms", "2000")
        await eventually(lambda: ready(settings, AGENTS), timeout_s=60)
        await submit_top(settings, mission_id, [task(f"t{i}", capability) for i in range(TASKS)], capability)

        [split] = named(await eventually(lambda: top_journal(settings, mission_id)), MissionSplit)
        [victim] = [share for share in split.shares if share.region == "region-0"]
        await eventually(lambda: journal(settings, "region-0", f"{mission_id}/{victim.share_id}"))
        processes.kill("region-0")
        events = await eventually(lambda: ended(settings, mission_id), timeout_s=120)

    [moved] = named(events, ShareMoved)
    assert (moved.share_id, moved.from_region, moved.region, moved.attempt) == (
        victim.share_id,
        "region-0",
        "region-1",
        1,
    )
    [done] = named(events, MissionCompleted)
    assert done.success
    moved_id = f"{mission_id}/{victim.share_id}/1"
    [recorded] = [e for e in named(events, ShareCompleted) if e.share_id == victim.share_id]
    assert (recorded.sub_mission_id, recorded.region) == (moved_id, "region-1")
    others = [f"{mission_id}/{share.share_id}" for share in split.shares if share is not victim]
    counts = await results_once(settings, [moved_id, *others])
    assert sorted(counts) == sorted(f"t{i}" for i in range(TASKS)) and set(counts.values()) == {1}


@pytest.mark.kafka_only  # the size check is the top's own, the same on both brokers
async def test_a_mission_whose_split_does_not_fit_the_top_journal_is_rejected_and_the_top_goes_on(
    own_settings: Settings,
):
    small = dataclasses.replace(own_settings, max_message_bytes=200_000)  # a top journal write of 200 KB at most
    suffix = uuid.uuid4().hex[:8]
    huge, fine, capability = f"huge-{suffix}", f"fine-{suffix}", f"top-{suffix}"
    async with TopService(small):
        # 300 KB of prompts: the submission fits swarm.missions (1 MB), the top's split of it does not fit 200 KB.
        prompts = [task(f"p{index}", capability) | {"prompt": "x" * 100_000} for index in range(3)]
        await submit_top(own_settings, huge, prompts, capability)
        await submit_top(own_settings, fine, [task("t0", capability)], capability)
        [split] = named(await eventually(lambda: top_journal(small, fine)), MissionSplit)
        [rejected] = named(await eventually(lambda: top_journal(small, huge)), MissionRejected)
    assert "does not fit one record batch of the top journal (200000 bytes)" in rejected.reason
    assert [task_id for share in split.shares for task_id in share.task_ids] == ["t0"]
