"""Metrics: the sensor hooks record the documented series, and a live coordinator and agent move them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml
from prometheus_client import generate_latest

from swarmlog.actors.brains.scripted import ScriptedBrain
from swarmlog.actors.shell.agent import AgentProcess
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.client import Mission, MissionClient, Task
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.errors import ConfigError
from swarmlog.kafka.producer import EventProducer
from swarmlog.metrics import METRICS, Metrics, Sensor, metric_names, sensor_for, serve
from swarmlog.schemas.records import MissionCompleted
from swarmlog.settings import Settings


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def scrape(port: int) -> str:
    """The exposition text of a /metrics endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        return response.read().decode()


def value(text: str, name: str, **labels: str) -> float:
    """The sample `name{labels}` in exposition text (labels matched as a subset), 0 when absent."""
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(rf"{name}(?:\{{(.*)\}})? (\S+)", line)
        if match:
            have = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1) or ""))
            if all(have.get(key) == wanted for key, wanted in labels.items()):
                total += float(match.group(2))
    return total


def test_every_hook_records_a_documented_series():
    metrics = Metrics()
    metrics.on_consumed("swarm.missions")
    metrics.on_produced("swarm.coordinator.journal", 3)
    metrics.on_decode_failure("swarm.tasks.events")
    metrics.on_assigned("region-0")
    metrics.on_queue_depth("region-0", 2)
    metrics.on_task_finished(1.5)
    metrics.on_heartbeat_age("agent-1", 0.4)
    metrics.on_tokens("agent-1", "prompt", 10)
    metrics.on_recovered("coordinator", 0.2)
    metrics.on_lag("swarm.missions", 0)
    text = generate_latest(metrics.registry).decode()
    assert metric_names(text) == set(METRICS)
    assert value(text, "swarmlog_events_produced_total", topic="swarm.coordinator.journal") == 3
    assert value(text, "swarmlog_task_duration_seconds_count") == 1
    metrics.on_heartbeat_age("agent-1", None)  # a dead agent's series goes away
    metrics.on_heartbeat_age("never-seen", None)
    assert "swarmlog_heartbeat_age_seconds{" not in generate_latest(metrics.registry).decode()


def test_names_follow_prometheus_conventions():
    for name, (kind, _, labels) in METRICS.items():
        assert re.fullmatch(r"swarmlog_[a-z_]+", name)
        assert name.endswith("_total") == (kind == "counter")
        assert kind != "histogram" or name.endswith("_seconds")
        assert all(re.fullmatch(r"[a-z]+", label) for label in labels)


def test_port_0_is_off_and_a_taken_port_is_one_clear_error():
    sensor, server = sensor_for(0)
    assert type(sensor) is Sensor and server is None
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        with pytest.raises(ConfigError, match="--metrics-port"):
            serve(Metrics(), taken.getsockname()[1])


async def test_a_live_coordinator_and_agent_move_their_series(settings: Settings, tmp_path: Path):
    capability = f"metrics-{uuid.uuid4().hex[:8]}"
    coordinator_metrics, agent_metrics = Metrics(), Metrics()
    coordinator_port, agent_port = free_port(), free_port()
    servers = [serve(coordinator_metrics, coordinator_port), serve(agent_metrics, agent_port)]
    agent_id = f"{capability}-agent"
    config = AgentConfig(
        agent_id=agent_id,
        capabilities=(capability, "decision_making"),
        brain="scripted",
        model=None,
        gpu=None,
        node="test",
        region="region-0",
        slot=50,
        data_dir=tmp_path / "agent",
        heartbeat_s=0.5,
    )
    agent = AgentProcess(config, settings, ScriptedBrain(), agent_metrics)
    try:
        async with CoordinatorService(
            settings, "region-0", data_dir=tmp_path / "coordinator", sensor=coordinator_metrics
        ):
            running = asyncio.create_task(agent.run())
            before = scrape(coordinator_port)
            assert value(before, "swarmlog_recovery_seconds", process="coordinator") > 0
            mission = Mission("metrics", tasks=(Task("a", "do a", (capability,)),), region="region-0")
            client = MissionClient(settings, client_name="test")
            result = await client.wait(await client.submit(mission), "region-0", timeout_s=90)
            assert isinstance(result, MissionCompleted), result
            after, agent_text = scrape(coordinator_port), scrape(agent_port)
            agent.stop()
            await asyncio.wait_for(running, 30)
    finally:
        for server in servers:
            server.close()
    for name, labels in [
        ("swarmlog_events_consumed_total", {"topic": "swarm.missions"}),
        ("swarmlog_events_consumed_total", {"topic": "swarm.tasks.events"}),
        ("swarmlog_events_produced_total", {"topic": "swarm.coordinator.journal"}),
        ("swarmlog_events_produced_total", {"topic": "swarm.agents.inbox"}),
        ("swarmlog_task_assignments_total", {"region": "region-0"}),
    ]:
        assert value(after, name, **labels) > value(before, name, **labels), (name, labels)
    assert 'swarmlog_queue_depth{region="region-0"}' in after
    assert value(agent_text, "swarmlog_recovery_seconds", process="agent") > 0
    assert value(agent_text, "swarmlog_events_consumed_total", topic="swarm.agents.inbox") >= 1
    assert value(agent_text, "swarmlog_events_produced_total", topic="swarm.tasks.events") >= 2
    assert value(agent_text, "swarmlog_events_produced_total", topic="swarm.agents.heartbeats") >= 1
    assert value(agent_text, "swarmlog_tokens_total", agent=agent_id, kind="completion") > 0
    assert value(agent_text, "swarmlog_task_duration_seconds_count") >= 1


PROMETHEUS = shutil.which("prometheus")


@pytest.mark.kafka_only  # checks the dashboard against a real Prometheus; one broker is enough, the reference one
@pytest.mark.skipif(
    PROMETHEUS is None, reason="the `prometheus` binary is not installed (apt-get install -y prometheus)"
)
async def test_every_dashboard_query_returns_series_from_a_live_swarm(settings: Settings, tmp_path: Path):
    capability = f"prom-{uuid.uuid4().hex[:8]}"
    ports = {name: free_port() for name in ("coordinator", "agent", "streams", "prometheus")}
    coordinator_metrics, agent_metrics = Metrics(), Metrics()
    servers = [serve(coordinator_metrics, ports["coordinator"]), serve(agent_metrics, ports["agent"])]
    config = tmp_path / "prometheus.yml"
    config.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {
                        "job_name": f"swarmlog-{name}",
                        "static_configs": [{"targets": [f"127.0.0.1:{ports[name]}"], "labels": {"process": name}}],
                    }
                    for name in ("coordinator", "agent", "streams")
                ],
            }
        )
    )
    env = {key: value for key, value in os.environ.items() if not key.startswith("SWARMLOG_")} | {
        "SWARMLOG_BROKER": settings.broker,
        "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
        "SWARMLOG_STREAMS_APP_ID": f"streams-{capability}",
        "SWARMLOG_METRICS_PORT": str(ports["streams"]),
    }
    agent = AgentProcess(
        AgentConfig(
            agent_id=f"{capability}-agent",
            capabilities=(capability, "decision_making"),
            brain="scripted",
            model=None,
            gpu=None,
            node="test",
            region="region-0",
            slot=51,
            data_dir=tmp_path / "agent",
            heartbeat_s=0.5,
        ),
        settings,
        ScriptedBrain(),
        agent_metrics,
    )
    with contextlib.ExitStack() as stack:
        for argv, log in (
            [
                [
                    PROMETHEUS,
                    f"--config.file={config}",
                    f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                    f"--web.listen-address=127.0.0.1:{ports['prometheus']}",
                ],
                "prometheus.log",
            ],
            [[sys.executable, "-m", "swarmlog", "streams", "--data-dir", str(tmp_path / "streams")], "streams.log"],
        ):
            child = subprocess.Popen(argv, env=env, stdout=(tmp_path / log).open("wb"), stderr=subprocess.STDOUT)
            stack.callback(_stop, child)
        stack.callback(lambda: [server.close() for server in servers])
        async with CoordinatorService(
            settings, "region-0", data_dir=tmp_path / "coordinator", sensor=coordinator_metrics
        ):
            running = asyncio.create_task(agent.run())
            async with EventProducer(settings, client_id="garbage") as producer:  # one dead letter for its panel
                await producer.raw.send_and_wait("swarm.missions", b"not an event", key=b"garbage")
            client = MissionClient(settings, client_name="test")
            mission = Mission(
                "prom", tasks=(Task("a", "do a", (capability,)), Task("b", "do b", (capability,))), region="region-0"
            )
            await asyncio.sleep(3)  # a few scrapes before the work, so rates have a baseline
            result = await client.wait(await client.submit(mission), "region-0", timeout_s=90)
            assert isinstance(result, MissionCompleted), result
            empty = await _eventually_every_query_has_series(ports["prometheus"], timeout_s=120)
            agent.stop()
            await asyncio.wait_for(running, 30)
    assert not empty, f"dashboard queries without series: {empty}; logs in {tmp_path}"


async def _eventually_every_query_has_series(port: int, timeout_s: float) -> list[str]:
    """Query Prometheus for every dashboard expression until all return series; the ones that still do not."""
    from test_compose import dashboard_queries  # tests/ is on sys.path

    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        empty = [expr for expr in dashboard_queries() if not await asyncio.to_thread(_series, port, expr)]
        if not empty or asyncio.get_running_loop().time() > deadline:
            return empty
        await asyncio.sleep(2)


def _series(port: int, expr: str) -> list:
    """The result of an instant query (empty when Prometheus is not up yet)."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return json.loads(response.read())["data"]["result"]
    except OSError:
        return []


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM a child process we started, then SIGKILL it if it lingers."""
    child.terminate()
    try:
        child.wait(30)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
