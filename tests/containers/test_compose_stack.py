"""docker-compose.yml's ci profile, run for real on the images built here, with host networking on loopback ports.

Kafka, Redis, Prometheus, the streams worker, a coordinator and two agents on the llama.cpp brain come up; a mission
submitted from the host completes; Prometheus scrapes every swarmlog process, and reports every metric the Grafana
dashboard queries; `down` leaves no container of the stack behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid
from pathlib import Path

import pytest
from coordinator.live import eventually
from test_compose import COMPOSE, compose_command, dashboard_queries, used_metrics

from swarmlog.client import MissionClient
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import AgentRegistered, MissionCompleted
from swarmlog.services import images
from swarmlog.services.docker import docker_available
from swarmlog.services.process import free_ports
from swarmlog.settings import Settings
from swarmlog.topics import JOURNAL, REGISTRY, TASK_EVENTS

AVAILABLE, WHY_NOT = docker_available()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT),
    pytest.mark.skipif(compose_command() is None, reason="neither `docker compose` nor `docker-compose` is installed"),
]
AGENTS = {"ci-agent-0", "ci-agent-1"}
PORTS = ("KAFKA", "CONTROLLER", "REDIS", "PROMETHEUS", "STREAMS_METRICS", "COORDINATOR_METRICS")
AGENT_PORTS = ("AGENT_0_METRICS", "AGENT_1_METRICS")


def prometheus_config(ports: dict[str, int]) -> str:
    """deploy/prometheus-ci.yml with this run's metrics ports."""
    config = (COMPOSE.parent / "deploy" / "prometheus-ci.yml").read_text()
    defaults = {
        "STREAMS_METRICS": 39101,
        "COORDINATOR_METRICS": 39102,
        "AGENT_0_METRICS": 39103,
        "AGENT_1_METRICS": 39104,
    }
    for name, default in defaults.items():
        config = config.replace(f"127.0.0.1:{default}", f"127.0.0.1:{ports[name]}")
    return config


def health(project: str) -> str:
    """Each container of the stack with its state and its last health check, for a failure's message."""
    found = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
    ).stdout.split()
    inspected = json.loads(subprocess.run(["docker", "inspect", *found], capture_output=True, text=True).stdout or "[]")
    return "\n".join(
        f"{box['Name']} {box['State']['Status']} {json.dumps((box['State'].get('Health') or {}).get('Log', [])[-1:])}"
        for box in inspected
    )


def prometheus(port: int, path: str) -> object:
    """The `data` of a Prometheus HTTP API answer."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
        return json.load(answer)["data"]


async def scraped(port: int, targets: int) -> bool:
    """Whether Prometheus has scraped every target, and all of them are up."""
    try:
        active = prometheus(port, "/api/v1/targets")["activeTargets"]  # type: ignore[index]
    except OSError:
        return False
    return len(active) == targets and all(target["health"] == "up" for target in active)


@pytest.mark.timeout(1200)  # images are built first when their inputs changed, and llama.cpp runs on 2 cores
async def test_the_ci_profile_runs_a_mission_and_prometheus_scrapes_every_process(tmp_path: Path) -> None:
    settings = Settings.from_env()
    images.ensure(list(images.BY_NAME), settings.cache_dir)  # tags `latest`, which the profile runs
    ports = dict(zip(PORTS + AGENT_PORTS, free_ports(len(PORTS + AGENT_PORTS)), strict=True))
    config = tmp_path / "prometheus.yml"
    config.write_text(prometheus_config(ports))
    config.chmod(0o644)
    env = os.environ | {f"SWARMLOG_CI_{name}_PORT": str(port) for name, port in ports.items()}
    env |= {"SWARMLOG_CI_PROMETHEUS_CONFIG": str(config), "SWARMLOG_SUITE_OWNER": str(os.getpid())}
    project = f"swarmlog-ci-{uuid.uuid4().hex[:8]}"
    compose = [*(compose_command() or []), "-f", str(COMPOSE), "-p", project, "--profile", "ci"]
    stack = Settings(
        broker="kafka",
        bootstrap=f"127.0.0.1:{ports['KAFKA']}",
        redis_url=f"redis://127.0.0.1:{ports['REDIS']}/0",
    )
    mission_id = f"ci-{uuid.uuid4().hex[:8]}"
    try:
        up = subprocess.run([*compose, "up", "-d"], env=env, capture_output=True, text=True, timeout=600)
        assert up.returncode == 0, up.stderr[-3000:] + health(project)
        async with Collector(stack, JOURNAL, REGISTRY) as log:
            await log.wait_for(lambda: {e.agent_id for e in log.named(AgentRegistered)} >= AGENTS, 240)
            mission = {
                "mission_id": mission_id,
                "title": "compose ci",
                "region": "region-0",
                "tasks": [
                    {"task_id": "write", "prompt": "Write a Python function that adds two numbers.",
                     "required_capabilities": ["coding"]},
                    {"task_id": "review", "prompt": "Review the function; name one improvement.",
                     "required_capabilities": ["review"], "depends_on": ["write"]},
                ],
                "final_action": {"prompt": "Ship or hold? Answer with a reason.",
                                 "required_capabilities": ["decision_making"]},
            }  # fmt: skip
            assert await MissionClient(stack).submit(mission) == mission_id
            async with EventProducer(stack, client_id="test-garbage") as producer:  # the decode-failure panel's data
                await producer.raw.send_and_wait(TASK_EVENTS, b"\x00not an event", key=mission_id.encode())
            await log.wait_for(lambda: log.named(MissionCompleted, mission_id=mission_id), 600)
        [done] = log.named(MissionCompleted, mission_id=mission_id)
        assert done.success, done

        await eventually(lambda: scraped(ports["PROMETHEUS"], targets=4), timeout_s=60)
        reported = set(prometheus(ports["PROMETHEUS"], "/api/v1/label/__name__/values"))  # type: ignore[arg-type]
        queried = set().union(*map(used_metrics, dashboard_queries()))
        folded = set().union(*(used_metrics(name) for name in reported if name.startswith("swarmlog_")))
        assert queried <= folded, f"the dashboard queries metrics Prometheus never saw: {sorted(queried - folded)}"
    finally:
        logs = subprocess.run([*compose, "logs", "--no-color"], env=env, capture_output=True, text=True, timeout=120)
        (tmp_path / "compose.log").write_text(logs.stdout + logs.stderr)
        down = subprocess.run(
            [*compose, "down", "--volumes", "--remove-orphans", "--timeout", "30"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert down.returncode == 0, down.stderr[-3000:]
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert left.stdout.strip() == "", f"containers left behind: {left.stdout}"
