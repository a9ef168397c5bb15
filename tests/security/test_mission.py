"""A mission with every process under its own role's principal, on SASL_SSL (SCRAM-SHA-512) and on mutual TLS:
`swarmlog coordinator` as coordinator, the streams worker as streams (its Faust app through `faust_credentials`),
scripted agents as agent."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from faults.mission import crew, results_once

from swarmlog.kafka.connection import client_options
from swarmlog.settings import SecurityProtocol, Settings

from .secured import SecuredKafka

TASKS = 6
ROLES = {"coordinator": "coordinator", "streams": "streams"}
"""The role each process of the crew runs as; the agents (named by their ids) run as `agent`."""


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"], ids=["sasl-ssl-scram-sha-512", "mutual-tls"])
async def test_a_mission_completes_with_every_process_under_its_own_user(
    secured_kafka: SecuredKafka, tmp_path: Path, protocol: SecurityProtocol
):
    admin = secured_kafka.settings_for("admin")  # the test's own reads and the submission

    async def nothing(mission_id: str) -> None:
        """No fault: the mission runs as it would in production."""

    environment_of = lambda name: secured_kafka.environment(ROLES.get(name, "agent"))
    async with crew(admin, tmp_path, env_of=environment_of) as swarm:
        events = await swarm.run_mission(TASKS, nothing, after_results=1)
        faust = await group_members(admin, swarm.worker.app_id)
        assert not swarm.dead(), f"processes exited: {swarm.dead()}; logs in {tmp_path}"
    results_once(events, TASKS)
    assert faust, f"the streams worker's Faust consumer group {swarm.worker.app_id} has no member"


async def group_members(settings: Settings, group: str) -> list[str]:
    """The client ids of a consumer group's members."""
    admin = AIOKafkaAdminClient(**client_options(settings))
    await admin.start()
    try:
        [response] = await admin.describe_consumer_groups([group])
    finally:
        await admin.close()
    [(_, _, _, _, _, members, *_)] = response.groups
    return [member[1] for member in members]
