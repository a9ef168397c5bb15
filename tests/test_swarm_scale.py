"""Issue #12's CI check, small: 200 agents on 2 fleet hosts in 2 regions run a 1,000-task mission that the top level
splits across both; one host is killed -9 mid-mission and started again. The mission completes, every task's result
is journaled once, replay equals the coordinators' live state, and no two agents share an inbox slot (every slot is
allocated by a coordinator: the hosts are given none).

Behaviour only: the bench (bench/swarm_bench.py) measures how fast.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from coordinator.harness import named, task
from coordinator.live import Processes, ended, eventually, top_journal

from swarmlog.client import MissionClient
from swarmlog.coordinator.announcements import served
from swarmlog.coordinator.shell.announce import read_announcements
from swarmlog.envelope import now_ms
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.schemas.records import (
    AgentRegistered,
    MissionCompleted,
    MissionSplit,
    SlotAllocated,
    TaskResultRecorded,
    TaskStarted,
)
from swarmlog.services import Broker
from swarmlog.settings import Settings
from swarmlog.topics import JOURNAL, REGISTRY, SLOTS, TASK_EVENTS

pytestmark = [pytest.mark.kafka_only, pytest.mark.slow]
REGIONS = ("region-0", "region-1")
AGENTS_PER_HOST, TASKS = 100, 1000
BRAIN = {"median_ms": 1500, "sigma": 0.3}


@pytest.fixture
def swarm_settings(own_broker: Broker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    """Two regions, an inbox of 256 partitions (every process the test starts reads the same environment)."""
    monkeypatch.setenv("SWARMLOG_REGIONS", str(len(REGIONS)))
    monkeypatch.setenv("SWARMLOG_INBOX_PARTITIONS", "256")
    monkeypatch.setenv("SWARMLOG_STREAMS_DATA_DIR", str(tmp_path / "streams"))
    monkeypatch.setenv("SWARMLOG_STREAMS_APP_ID", f"streams-{uuid.uuid4().hex[:8]}")
    monkeypatch.setenv("SWARMLOG_STREAMS_LIVENESS_TIMEOUT_MS", "3000")
    return dataclasses.replace(Settings.from_env(), broker=own_broker.kind, bootstrap=own_broker.bootstrap)


async def all_idle(settings: Settings) -> bool:
    """Whether both regions are served and announce every agent of their host idle."""
    latest = await read_announcements(settings)
    return served(latest, REGIONS, now_ms()) == REGIONS and all(
        latest[region].idle_agents >= AGENTS_PER_HOST for region in REGIONS
    )


async def test_a_1000_task_mission_spans_two_regions_of_fleets_through_a_host_kill_9(
    swarm_settings: Settings, tmp_path: Path
) -> None:
    settings = swarm_settings
    await ensure_topics(settings, grow_inbox=True)
    capability, mission_id = f"scale-{uuid.uuid4().hex[:8]}", f"scale-{uuid.uuid4().hex[:8]}"
    brain = tmp_path / "brain.json"
    brain.write_text(json.dumps(BRAIN))
    hosts = {f"{capability}-{n}": region for n, region in enumerate(REGIONS)}
    processes = Processes(settings, tmp_path)

    def start_host(host: str) -> None:
        processes.start(
            host,
            "fleet",
            *("--agents", str(AGENTS_PER_HOST), "--name", host, "--region", hosts[host]),
            *("--capabilities", capability, "--brain", "scripted", "--model", str(brain)),
            *("--data-dir", str(tmp_path / "agents")),
        )

    async with Collector(settings, JOURNAL, TASK_EVENTS, REGISTRY, SLOTS) as log:
        try:
            processes.start("streams", "streams")
            for region in REGIONS:
                processes.start(region, "coordinator", "--region", region, "--data-dir", str(tmp_path / "coordinator"))
            processes.start("top", "top")
            for host in hosts:
                start_host(host)
            agents = {f"{host}-{n}" for host in hosts for n in range(AGENTS_PER_HOST)}
            await log.wait_for(lambda: agents <= {e.agent_id for e in log.named(AgentRegistered)}, timeout_s=180)
            await eventually(lambda: all_idle(settings), timeout_s=60)  # what the top level splits by
            mission = {"mission_id": mission_id, "title": "scale", "region": "top"}
            tasks = [task(f"t{i}", capability) for i in range(TASKS)]
            assert await MissionClient(settings).submit(mission | {"tasks": tasks}) == mission_id

            # kill -9 one host once a quarter of the work has started, and start it again at once
            victim = next(iter(hosts))
            await log.wait_for(lambda: len(log.named(TaskStarted)) >= TASKS // 4, timeout_s=120)
            processes.kill(victim)
            start_host(victim)
            events = await eventually(lambda: ended(settings, mission_id), timeout_s=300)
        finally:
            processes.stop_all()  # SIGTERM: the coordinators write their snapshots
        split = named(await top_journal(settings, mission_id), MissionSplit)

    [done] = named(events, MissionCompleted)
    assert done.success and done.tasks_completed == TASKS, done
    assert sorted(share.region for share in split[0].shares) == list(REGIONS)  # the mission spans both regions
    recorded = collections.Counter(
        e.task_id for e in log.named(TaskResultRecorded) if e.mission_id.startswith(f"{mission_id}/") and not e.stale
    )
    assert recorded == {f"t{i}": 1 for i in range(TASKS)}  # nothing lost, nothing doubled
    allocated = {e.agent_id: e.slot for e in log.named(SlotAllocated) if e.agent_id in agents}
    assert set(allocated) == agents and len(set(allocated.values())) == len(agents)  # no shared slots
    registered = {(e.agent_id, e.slot) for e in log.named(AgentRegistered) if e.agent_id in agents}
    assert registered == set(allocated.items())  # each agent reads the slot allocated to it, before and after kill -9
    for region in REGIONS:
        verify = ["replay", "verify", "coordinator", "--key", region, "--data-dir", str(tmp_path / "coordinator")]
        verify += ["--bootstrap", settings.bootstrap or ""]
        verified = subprocess.run(
            [sys.executable, "-m", "swarmlog", *verify, "--json"], capture_output=True, text=True, timeout=300
        )
        assert verified.returncode == 0, verified.stdout[-3000:] + verified.stderr[-3000:]
        [live] = json.loads(verified.stdout)["live"]
        assert live["differences"] == 0 and live["live"], live  # replay equals the live state
