"""`swarmlog topics ensure` creates the catalog with its configuration, and is safe to run again."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from swarmlog.kafka.admin import ensure_topics
from swarmlog.settings import Settings
from swarmlog.topics import catalog


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the swarmlog CLI against the settings' broker."""
    env = {"SWARMLOG_BOOTSTRAP": settings.bootstrap or "", "SWARMLOG_BROKER": settings.broker, "PATH": ""}
    return subprocess.run(
        [sys.executable, "-m", "swarmlog", *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_ensure_twice_through_the_cli_creates_then_finds_every_topic(settings: Settings) -> None:
    first = _cli(settings, "topics", "ensure", "--json")
    second = _cli(settings, "topics", "ensure", "--json")

    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    expected = {spec.name: spec.partitions for spec in catalog(settings)}
    for run in (first, second):
        outcomes = json.loads(run.stdout)
        assert {o["name"]: o["partitions"] for o in outcomes} == expected
        assert all(o["action"] in ("created", "exists") for o in outcomes)
    assert all(o["action"] == "exists" for o in json.loads(second.stdout))


@pytest.mark.kafka_only
async def test_topics_carry_the_catalog_configuration(settings: Settings) -> None:
    await ensure_topics(settings)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        for spec in catalog(settings):
            (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, spec.name)])
            configs = {entry[0]: entry[1] for entry in response.resources[0][4]}
            assert {key: configs[key] for key in spec.configs(settings)} == spec.configs(settings), spec.name
    finally:
        await admin.close()


async def test_a_topic_with_too_few_partitions_is_reported_not_changed(settings: Settings) -> None:
    await ensure_topics(settings)
    wider = dataclasses.replace(settings, inbox_partitions=settings.inbox_partitions * 2)

    outcomes = {o.name: o for o in await ensure_topics(wider)}

    inbox = outcomes["swarm.agents.inbox"]
    assert inbox.action == "mismatch"
    assert inbox.partitions == settings.inbox_partitions
    assert f"the catalog wants {wider.inbox_partitions}" in inbox.detail


def test_an_unreachable_bootstrap_says_how_to_fix_it() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "swarmlog", "topics", "ensure"],
        capture_output=True,
        text=True,
        env={"SWARMLOG_BOOTSTRAP": "127.0.0.1:1", "PATH": ""},
        timeout=60,
    )

    assert result.returncode == 3
    assert "no Kafka broker answers at 127.0.0.1:1" in result.stderr
    assert "SWARMLOG_BOOTSTRAP" in result.stderr
