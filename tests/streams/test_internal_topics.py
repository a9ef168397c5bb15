"""The worker's own topics at start: changelog configurations altered only where they differ."""

from __future__ import annotations

import uuid

import pytest
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from swarmlog.streams.app.grouped import CHANGELOG_CONFIGS
from swarmlog.streams.app.run import _compact_as_folded


@pytest.mark.kafka_only
async def test_a_changelog_is_altered_once_and_keeps_the_overrides_it_had(broker):
    name = f"test-changelog-{uuid.uuid4().hex[:8]}"
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    try:
        await admin.create_topics(
            [NewTopic(name, 1, 1, topic_configs={"cleanup.policy": "compact", "max.message.bytes": "2000000"})]
        )
        assert await _compact_as_folded([name], admin) == 1
        configs = await _configs(admin, name)
        assert {key: configs[key] for key in CHANGELOG_CONFIGS} == CHANGELOG_CONFIGS
        assert configs["max.message.bytes"] == "2000000"  # AlterConfigs replaces every override: it was sent along

        altered = []
        real_alter = admin.alter_configs

        async def counted(resources):
            altered.append(resources)
            return await real_alter(resources)

        admin.alter_configs = counted  # type: ignore[method-assign]
        assert await _compact_as_folded([name], admin) == 0  # the next start: described, already as folded
        assert altered == []
    finally:
        await admin.delete_topics([name])
        await admin.close()


async def _configs(admin: AIOKafkaAdminClient, topic: str) -> dict[str, str]:
    (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
    return {entry[0]: entry[1] for entry in response.resources[0][4]}
