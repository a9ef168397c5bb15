"""A mission on a three-node KRaft cluster (replication 3, min.insync.replicas 2) while one broker is killed with
SIGKILL and restarted, then the active controller: the mission completes, each task's result is journaled once, and
the coordinator's live state (its snapshot at stop) equals the journal's replay."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from swarmlog.cli import app
from swarmlog.schemas.records import AgentDeclaredDead
from swarmlog.services import KafkaCluster, KafkaNode, run_kafka_cluster
from swarmlog.settings import Settings

from .mission import REGION, crew, results_once

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(900)]
TASKS, DOWN_S = 60, 5.0


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    """Three combined broker+controller nodes, each restartable."""
    with run_kafka_cluster(Settings.from_env().cache_dir, nodes=3) as started:
        yield started


@pytest.fixture
def on_cluster(cluster: KafkaCluster, redis_url: str) -> Settings:
    """Settings for the cluster: every topic replicated three times."""
    return dataclasses.replace(
        Settings.from_env(), broker="kafka", bootstrap=cluster.bootstrap, redis_url=redis_url, replication_factor=3
    )


async def crash_and_restart(node: KafkaNode) -> None:
    """kill -9 the node, leave it down for DOWN_S, start it again on its ports and data."""
    node.kill()
    await asyncio.sleep(DOWN_S)
    node.spawn()  # from the loop's thread: a node dies with the thread that spawned it
    await asyncio.to_thread(node.wait_ready, 120)


async def test_a_broker_then_the_active_controller_killed_mid_mission_lose_and_double_nothing(
    cluster: KafkaCluster, on_cluster: Settings, tmp_path: Path
):
    killed: list[tuple[str, int]] = []

    async def faults(mission_id: str) -> None:
        controller = cluster.active_controller()
        assert controller is not None, "the quorum has a leader"
        broker = next(node for node in cluster.nodes if node.node_id != controller)
        assert running.running(mission_id), "the faults must come mid-mission"
        killed.append(("broker", broker.node_id))
        await crash_and_restart(broker)
        controller = cluster.active_controller()  # the leader may have moved meanwhile
        assert controller is not None and running.running(mission_id), "the faults must come mid-mission"
        killed.append(("active controller", controller))
        await crash_and_restart(cluster.node(controller))

    async with crew(on_cluster, tmp_path, brain_ms=1500) as running:
        events = await running.run_mission(TASKS, faults, after_results=3, timeout_s=300)
        assert not running.dead(), f"processes died: {running.dead()}; logs in {tmp_path}"
        deaths = running.log.named(AgentDeclaredDead)
    print(f"\nkilled and restarted {killed}; mission of {TASKS} tasks completed")
    assert not deaths, f"agents declared dead: {[d.agent_id for d in deaths]}"
    results_once(events, TASKS)
    # The coordinator stopped (SIGTERM) with its snapshot: replay of the journal must equal it.
    env = {"SWARMLOG_BROKER": "kafka", "SWARMLOG_BOOTSTRAP": cluster.bootstrap}
    verified = await asyncio.to_thread(
        CliRunner().invoke,
        app,
        ["replay", "verify", "coordinator", "--key", REGION, "--data-dir", str(tmp_path / "coordinator"), "--json"],
        env=env,
    )
    assert verified.exit_code == 0, verified.output
    [live] = json.loads(verified.output)["live"]
    assert live["differences"] == 0, live
