"""The single broker of `swarmlog up --broker kafka` killed with SIGKILL mid-mission and started again on its ports
and data, after an outage longer than the liveness timeout: every process rides it out, the streams worker's /metrics
shows it waiting, no agent is declared dead, the mission completes and each task's result is journaled once."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from metrics_scrape import broker_waiting_seconds

from swarmlog.schemas.records import AgentDeclaredDead
from swarmlog.services import KafkaCluster, run_kafka_cluster
from swarmlog.services.process import free_ports
from swarmlog.settings import Settings

from .mission import crew, results_once

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(600)]
OUTAGE_S = 12.0  # longer than the streams worker's 5 s liveness timeout, within the 10-20 s processes must survive
TASKS = 30


@pytest.fixture(scope="module")
def single() -> Iterator[KafkaCluster]:
    """One Kafka node as `swarmlog up --broker kafka` runs it, restartable."""
    with run_kafka_cluster(Settings.from_env().cache_dir, nodes=1) as cluster:
        yield cluster


@pytest.fixture
def on_single(single: KafkaCluster, redis_url: str) -> Settings:
    """Settings for the single node."""
    return dataclasses.replace(Settings.from_env(), broker="kafka", bootstrap=single.bootstrap, redis_url=redis_url)


async def test_a_broker_outage_longer_than_the_liveness_timeout_kills_no_agent_and_doubles_no_result(
    single: KafkaCluster, on_single: Settings, tmp_path: Path
):
    [node] = single.nodes
    [metrics_port] = free_ports(1)
    seen: dict[str, float] = {}

    async def bounce(mission_id: str) -> None:
        assert running.running(mission_id), "the fault must come mid-mission"
        node.kill()
        started = time.monotonic()
        while time.monotonic() - started < OUTAGE_S:  # the worker's gauge while the broker is away
            seen["waiting"] = max(
                seen.get("waiting", 0.0), await asyncio.to_thread(broker_waiting_seconds, metrics_port)
            )
            await asyncio.sleep(0.5)
        node.spawn()  # from the loop's thread: a node dies with the thread that spawned it
        await asyncio.to_thread(node.wait_ready, 120)
        seen["outage"] = time.monotonic() - started

    async with crew(on_single, tmp_path, streams_metrics_port=metrics_port) as running:
        events = await running.run_mission(TASKS, bounce, after_results=3)
        assert not running.dead(), f"processes died during the outage: {running.dead()}; logs in {tmp_path}"
        await asyncio.sleep(7)  # more than a liveness timeout after the mission: a late false death would show now
        deaths = running.log.named(AgentDeclaredDead)
        after = await asyncio.to_thread(broker_waiting_seconds, metrics_port)
    print(
        f"\nbroker outage {seen['outage']:.1f} s (the worker's gauge reached {seen['waiting']:.1f} s); "
        f"mission of {TASKS} tasks completed"
    )
    assert not deaths, f"agents declared dead by a broker outage: {[d.agent_id for d in deaths]}"
    results_once(events, TASKS)
    assert seen["waiting"] > 0 and after == 0, "/metrics shows the wait for the broker, and its end"
