"""A fold's changelog has its inputs' partition count, whatever the settings say; an existing one that differs stops
the worker at start with a configuration error (exit 3)."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from swarmlog.commands.common import EXIT_CONFIG, _exit_code
from swarmlog.kafka.admin import ensure_topics
from swarmlog.settings import Settings
from swarmlog.streams.app.build import build_app
from swarmlog.streams.app.config import StreamsConfig
from swarmlog.streams.app.run import ChangelogPartitionsMismatch, ensure_internal_topics
from swarmlog.streams.app.run import _partitions as described_partitions
from swarmlog.streams.registry import PROJECTION
from swarmlog.topics import CONTROL, USAGE

pytestmark = pytest.mark.kafka_only


@pytest.fixture
async def grown(own_broker) -> Settings:
    """A fresh broker whose registry inputs have 3 partitions while the settings say 2 (made with another setting,
    or grown: the catalog check accepts more partitions than it asks for)."""
    settings = dataclasses.replace(
        Settings.from_env(),
        broker=own_broker.kind,
        bootstrap=own_broker.bootstrap,
        redis_url=None,
        default_partitions=2,
    )
    admin = AIOKafkaAdminClient(bootstrap_servers=own_broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(topic, 3, 1) for topic in PROJECTION.topics])
    finally:
        await admin.close()
    await ensure_topics(settings)
    return settings


async def test_a_changelog_is_made_with_its_inputs_partitions_not_the_default(grown):
    config = StreamsConfig(grown, app_id=f"test-{uuid.uuid4().hex[:8]}")
    await ensure_internal_topics(build_app(config), config)
    counts = await _partitions(grown, [f"{config.app_id}-registry-changelog", f"{config.app_id}-budgets-changelog"])
    assert counts == {f"{config.app_id}-registry-changelog": 3, f"{config.app_id}-budgets-changelog": 2}
    assert (await _partitions(grown, [USAGE, CONTROL])) == {USAGE: 2, CONTROL: 2}
    await ensure_internal_topics(build_app(config), config)  # a restart finds them as they should be


async def test_an_existing_changelog_with_other_partitions_is_a_config_error_naming_the_fix(grown):
    config = StreamsConfig(grown, app_id=f"test-{uuid.uuid4().hex[:8]}")
    admin = AIOKafkaAdminClient(bootstrap_servers=grown.bootstrap)
    await admin.start()
    try:  # made by a worker that sized it from the settings
        await admin.create_topics([NewTopic(f"{config.app_id}-registry-changelog", 2, 1)])
    finally:
        await admin.close()
    with pytest.raises(ChangelogPartitionsMismatch, match=r"has 2 partitions .* have 3.*consumer group") as raised:
        await ensure_internal_topics(build_app(config), config)
    assert _exit_code(raised.value) == EXIT_CONFIG


async def _partitions(settings: Settings, topics: list[str]) -> dict[str, int]:
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    await admin.start()
    try:
        return await described_partitions(admin, topics)
    finally:
        await admin.close()
