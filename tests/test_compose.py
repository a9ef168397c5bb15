"""docker-compose.yml, deploy/prometheus.yml and the Grafana dashboard: valid, complete, and on our metric names."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from swarmlog.metrics import METRICS

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "swarmlog.json"
SUFFIXES = ("_bucket", "_count", "_sum")


def compose_command() -> list[str] | None:
    """`docker compose` when the CLI has the compose plugin, else the standalone `docker-compose`, else None."""
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def services() -> dict:
    """The compose file's services, YAML merge keys resolved."""
    return yaml.safe_load(COMPOSE.read_text())["services"]


def test_compose_config_is_valid():
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` (the docker CLI's compose plugin) nor `docker-compose` is installed")
    result = subprocess.run([*command, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr


def test_the_stack_has_every_process_and_one_gpu_per_agent():
    found = services()
    assert found["kafka"]["image"] == "apache/kafka:4.1.2"
    assert "controller" in found["kafka"]["environment"]["KAFKA_PROCESS_ROLES"]  # KRaft, no ZooKeeper
    assert {"redis", "topics", "streams", "coordinator", "prometheus", "grafana"} <= set(found)
    assert found["topics"]["command"] == ["topics", "ensure"] and found["topics"]["restart"] == "no"
    agents = {name: spec for name, spec in found.items() if name.startswith("agent-")}
    assert len(agents) >= 4
    gpus = []
    for spec in agents.values():
        assert spec["command"][spec["command"].index("--brain") + 1] == "vllm"
        (device,) = spec["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"] and len(device["device_ids"]) == 1
        gpus += device["device_ids"]
        assert spec["environment"]["SWARMLOG_METRICS_PORT"] == "9100"
    assert len(set(gpus)) == len(agents)  # one GPU each
    slots = [spec["command"][spec["command"].index("--slot") + 1] for spec in agents.values()]
    assert len(set(slots)) == len(agents)


def test_prometheus_scrapes_every_swarmlog_process():
    config = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = {
        target for job in config["scrape_configs"] for group in job["static_configs"] for target in group["targets"]
    }
    swarmlog = {name for name, spec in services().items() if spec.get("image") == "swarmlog:latest"} - {"topics"}
    assert targets == {f"{name}:9100" for name in swarmlog}


def dashboard_queries() -> list[str]:
    """Every PromQL expression of the provisioned dashboard."""
    return [target["expr"] for panel in json.loads(DASHBOARD.read_text())["panels"] for target in panel["targets"]]


def used_metrics(expr: str) -> set[str]:
    """The swarmlog metric names an expression reads (histogram series folded back to their metric)."""
    names = set()
    for name in re.findall(r"\bswarmlog_[a-z_]+\b", expr):
        for suffix in SUFFIXES:
            if name.endswith(suffix) and name.removesuffix(suffix) in METRICS:
                name = name.removesuffix(suffix)
        names.add(name)
    return names


def test_the_dashboard_queries_only_metrics_we_define_and_shows_them_all():
    queries = dashboard_queries()
    assert queries
    for expr in queries:
        assert used_metrics(expr), f"{expr!r} reads no swarmlog metric"
        assert used_metrics(expr) <= set(METRICS), f"{expr!r} reads undefined {used_metrics(expr) - set(METRICS)}"
    assert set().union(*map(used_metrics, queries)) == set(METRICS)


def test_grafana_is_provisioned_with_the_datasource_the_dashboard_uses():
    provisioning = ROOT / "deploy" / "grafana" / "provisioning"
    (datasource,) = yaml.safe_load((provisioning / "datasources" / "prometheus.yml").read_text())["datasources"]
    panels = json.loads(DASHBOARD.read_text())["panels"]
    assert {panel["datasource"]["uid"] for panel in panels} == {datasource["uid"]}
    provider = yaml.safe_load((provisioning / "dashboards" / "swarmlog.yml").read_text())["providers"][0]
    mounts = services()["grafana"]["volumes"]
    assert f"./deploy/grafana/dashboards:{provider['options']['path']}:ro" in mounts


def test_the_agents_image_installs_vllm_the_way_make_vllm_does():
    build = yaml.safe_load(COMPOSE.read_text())["x-swarmlog"]["build"]
    assert build["args"]["VLLM"] == "gpu"  # the official wheel on the GPU agents
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert 'ARG VLLM="gpu"' in dockerfile
    assert 'SWARMLOG_VLLM="$VLLM" bash scripts/install-vllm-stack.sh python .' in dockerfile
    assert "scripts/install-vllm-stack.sh" in (ROOT / "scripts" / "setup-vllm.sh").read_text()
