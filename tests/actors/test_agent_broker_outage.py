"""An agent while its broker is away: /metrics shows how long it has waited, one WARNING line at each end of the wait,
and it carries on when the broker is back (a single Kafka node killed with SIGKILL and started again)."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_harness import Log, start_agent, stop_agent
from metrics_scrape import broker_waiting_seconds

from swarmlog import topics
from swarmlog.kafka.admin import ensure_topics
from swarmlog.schemas.records import AgentRegistered
from swarmlog.services import KafkaCluster, run_kafka_cluster
from swarmlog.services.process import free_ports
from swarmlog.settings import Settings

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]
OUTAGE_S = 8.0


@pytest.fixture(scope="module")
def single() -> Iterator[KafkaCluster]:
    """One Kafka node, restartable on its ports and data."""
    with run_kafka_cluster(Settings.from_env().cache_dir, nodes=1) as cluster:
        yield cluster


async def test_the_agents_wait_for_the_broker_is_on_metrics_and_logged_once_at_each_end(
    single: KafkaCluster, tmp_path: Path
):
    settings = dataclasses.replace(Settings.from_env(), broker="kafka", bootstrap=single.bootstrap)
    await ensure_topics(settings)
    [node] = single.nodes
    [port] = free_ports(1)
    agent_id = f"agent-{uuid.uuid4().hex[:8]}"
    process = start_agent(settings, agent_id, 0, tmp_path, "--brain", "scripted", "--metrics-port", str(port))
    try:
        async with Log(settings, topics.REGISTRY) as log:
            await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
        before = await asyncio.to_thread(broker_waiting_seconds, port)
        node.kill()
        seen, started = 0.0, time.monotonic()
        while time.monotonic() - started < OUTAGE_S:
            seen = max(seen, await asyncio.to_thread(broker_waiting_seconds, port))
            await asyncio.sleep(0.5)
        node.spawn()  # from the loop's thread: a node dies with the thread that spawned it
        await asyncio.to_thread(node.wait_ready, 120)
        deadline = time.monotonic() + 60
        while (after := await asyncio.to_thread(broker_waiting_seconds, port)) > 0 and time.monotonic() < deadline:
            await asyncio.sleep(0.5)
        assert process.poll() is None, "the agent died while the broker was away"
        assert stop_agent(process) == 0
    finally:
        if process.poll() is None:
            process.kill()
    lines = (tmp_path / f"{agent_id}.log").read_text().splitlines()
    waits = [line for line in lines if f"waiting for the broker at {single.bootstrap} to take the events" in line]
    ends = [line for line in lines if f"the broker at {single.bootstrap} answers again after" in line]
    print(f"\nthe agent's gauge reached {seen:.1f} s in a {OUTAGE_S:.0f} s outage; {ends}")
    assert before == 0 and OUTAGE_S - 4 < seen <= OUTAGE_S + 1 and after == 0
    assert len(waits) == 1 and len(ends) == 1 and "WARNING" in waits[0] and "WARNING" in ends[0]
