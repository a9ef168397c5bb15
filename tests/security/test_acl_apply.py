"""`swarmlog acl apply` on the secured Kafka: each role's principal gets its role's ACLs and nothing else, the broker
refuses what a role may not do and nothing changes, a second apply changes nothing, and missions (one of them split by
the top level) complete with every process under its own role.

The principals here (`least-<role>`) are made for this module with the admin's AlterUserScramCredentials, so the
session's per-role users keep the broad grant the other security tests run with."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import secrets
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError, for_code
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.types import CompactArray, CompactBytes, CompactString, Int8, Int16, Int32, Schema, TaggedFields
from coordinator.harness import task
from coordinator.live import ended, eventually, journal, named
from faults.mission import REGION, crew

from swarmlog.acl import Role, bindings, grants
from swarmlog.client import MissionClient
from swarmlog.commands.common import EXIT_CONFIG
from swarmlog.kafka.acls import apply_acls
from swarmlog.kafka.connection import client_options, environment
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.records import MissionCompleted
from swarmlog.settings import Secret, Settings
from swarmlog.topics import CONTROL, INBOX, JOURNAL, MISSIONS, REGISTRY

from .secured import SecuredKafka

STREAMS_APP_PREFIX = "streams-"
"""The test workers' app ids (`worker_harness.Worker`: streams-<hex>), granted as one prefix."""
SCRAM_SHA_512 = 2
SCRAM_ITERATIONS = 4096


class _AlterScramResponse(Response):
    API_KEY = 51
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        (
            "results",
            CompactArray(
                ("user", CompactString("utf-8")),
                ("error_code", Int16),
                ("error_message", CompactString("utf-8")),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _AlterScramStruct(RequestStruct):
    FLEXIBLE_VERSION = True
    API_KEY = 51
    API_VERSION = 0
    RESPONSE_TYPE = _AlterScramResponse
    SCHEMA = Schema(
        ("deletions", CompactArray(("name", CompactString("utf-8")), ("mechanism", Int8), ("tags", TaggedFields))),
        (
            "upsertions",
            CompactArray(
                ("name", CompactString("utf-8")),
                ("mechanism", Int8),
                ("iterations", Int32),
                ("salt", CompactBytes),
                ("salted_password", CompactBytes),
                ("tags", TaggedFields),
            ),
        ),
        ("tags", TaggedFields),
    )


class _AlterScram(Request[_AlterScramStruct]):
    """AlterUserScramCredentials v0 upserting SCRAM-SHA-512 users (aiokafka has no such call)."""

    API_KEY = 51

    def __init__(self, passwords: dict[str, str]) -> None:
        self._upsertions = []
        for name, password in passwords.items():
            salt = secrets.token_bytes(16)
            salted = hashlib.pbkdf2_hmac("sha512", password.encode(), salt, SCRAM_ITERATIONS)
            self._upsertions.append((name, SCRAM_SHA_512, SCRAM_ITERATIONS, salt, salted, {}))

    def build(self, request_struct_class: type[_AlterScramStruct]) -> _AlterScramStruct:
        return request_struct_class([], self._upsertions, {})


@dataclasses.dataclass(frozen=True)
class Least:
    """A principal per role, holding exactly what `swarmlog acl apply` granted its role."""

    kafka: SecuredKafka
    password_files: dict[Role, Path]

    @property
    def admin(self) -> Settings:
        """The admin's settings (a super user)."""
        return self.kafka.settings_for("admin")

    @property
    def principals(self) -> dict[Role, tuple[str, ...]]:
        """Each role's principal."""
        return {role: (f"User:least-{role}",) for role in Role}

    def settings(self, role: Role) -> Settings:
        """Settings of a process of `role`, on SASL_SSL with SCRAM-SHA-512."""
        return dataclasses.replace(
            self.admin,
            kafka_username=f"least-{role}",
            kafka_password=Secret.from_file(self.password_files[role], "SWARMLOG_KAFKA_PASSWORD_FILE"),
        )

    def env(self, role: Role) -> dict[str, str]:
        """The environment of a `swarmlog` process of `role` (the broker takes no client without credentials, so
        a process given these runs as the role's principal)."""
        settings = self.settings(role)
        return {"SWARMLOG_BROKER": "kafka", "SWARMLOG_BOOTSTRAP": settings.bootstrap or "", **environment(settings)}


@pytest.fixture(scope="module")
def least(secured_kafka: SecuredKafka, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Least]:
    """The `least-<role>` users, made now, with their roles' ACLs applied as `swarmlog acl apply --prune` does."""
    folder = tmp_path_factory.mktemp("least")
    passwords = {role: secrets.token_urlsafe(18) for role in Role}
    files = {}
    for role, password in passwords.items():
        files[role] = folder / role.value
        files[role].write_text(password + "\n")
    least = Least(secured_kafka, files)
    asyncio.run(_add_users(least.admin, {f"least-{role}": password for role, password in passwords.items()}))
    wanted = bindings(grants(least.admin, streams_app_id=STREAMS_APP_PREFIX), least.principals)
    asyncio.run(apply_acls(least.admin, wanted, prune=True, dry_run=False))
    asyncio.run(_can_log_in(least.settings(Role.OPERATOR)))
    yield least


async def _add_users(admin: Settings, passwords: dict[str, str]) -> None:
    """Make SCRAM-SHA-512 users, as the admin."""
    client = AIOKafkaConsumer(**client_options(admin), client_id="test-scram")
    await client.start()
    try:
        response = await client._client.send(client._client.get_random_node(), _AlterScram(passwords))
        assert all(code == 0 for _, code, *_ in response.results), response.results
    finally:
        await client.stop()


async def _can_log_in(settings: Settings, timeout_s: float = 30.0) -> None:
    """Wait until the broker knows a new user's credentials (applied from the controller's metadata)."""
    deadline = time.monotonic() + timeout_s
    while True:
        client = AIOKafkaAdminClient(**client_options(settings), client_id="test-login")
        try:
            await client.start()
            return
        except KafkaError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)
        finally:
            await client.close()


async def _ends(admin: Settings, *tps: TopicPartition) -> dict[TopicPartition, int]:
    """The end offsets of partitions, as the admin sees them."""
    consumer = AIOKafkaConsumer(**client_options(admin), client_id="test-ends")
    await consumer.start()
    try:
        ends: dict[TopicPartition, int] = await consumer.end_offsets(list(tps))
        return ends
    finally:
        await consumer.stop()


async def _refused_write(settings: Settings, topic: str) -> None:
    """Raise unless the broker refuses this principal a write to partition 0 of `topic`."""
    producer = AIOKafkaProducer(**client_options(settings), client_id="test-forger", request_timeout_ms=15_000)
    await producer.start()
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            await producer.send_and_wait(topic, b"forged", key=b"region-0", partition=0)
    finally:
        await producer.stop()


async def _records(settings: Settings, topic: str) -> list[Any]:
    """Partition 0 of `topic` read to its end."""
    consumer = reader(settings, "test-reader", transactional=True)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        return [record async for record in records_to_end(consumer, tp)]
    finally:
        await consumer.stop()


async def _metadata_error(settings: Settings, topic: str) -> type[Exception] | None:
    """The error the broker answers this principal's metadata request for `topic` with (every read starts with one;
    aiokafka only logs it and retries), None when it describes the topic."""
    client = AIOKafkaAdminClient(**client_options(settings), client_id="test-metadata")
    await client.start()
    try:
        (described,) = await client.describe_topics([topic])
        return for_code(described["error_code"]) if described["error_code"] else None
    finally:
        await client.close()


async def test_a_producer_writing_the_journal_or_the_inbox_is_refused_and_nothing_changes(least: Least) -> None:
    partitions = (TopicPartition(JOURNAL, 0), TopicPartition(INBOX, 0))
    before = await _ends(least.admin, *partitions)

    for topic in (JOURNAL, INBOX):
        await _refused_write(least.settings(Role.PRODUCER), topic)

    assert await _ends(least.admin, *partitions) == before


async def test_an_agent_reads_no_journal_and_submits_no_mission(least: Least) -> None:
    agent = least.settings(Role.AGENT)
    before = await _ends(least.admin, TopicPartition(MISSIONS, 0))

    assert await _metadata_error(agent, JOURNAL) is TopicAuthorizationFailedError
    await _refused_write(agent, MISSIONS)

    assert await _ends(least.admin, TopicPartition(MISSIONS, 0)) == before
    assert await _metadata_error(agent, REGISTRY) is None  # what it needs, it reads
    await _records(agent, REGISTRY)


async def test_the_operator_reads_the_journal_and_writes_nothing(least: Least) -> None:
    operator = least.settings(Role.OPERATOR)

    await asyncio.wait_for(_records(operator, JOURNAL), 30)
    for topic in (CONTROL, JOURNAL):
        await _refused_write(operator, topic)


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    """`swarmlog acl apply --json ARGS` as the settings' principal."""
    return subprocess.run(
        [sys.executable, "-m", "swarmlog", "acl", "apply", "--json", *args],
        capture_output=True,
        text=True,
        env=os.environ
        | {"SWARMLOG_BROKER": "kafka", "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
        | environment(settings),
        timeout=120,
    )


def _apply(least: Least, *args: str) -> dict[str, Any]:
    """`swarmlog acl apply --json` as the admin; its JSON output."""
    run = _cli(least.admin, *args)
    assert run.returncode == 0, run.stderr
    result: dict[str, Any] = json.loads(run.stdout)
    return result


def test_acl_apply_twice_creates_nothing_the_second_time_and_prunes_only_what_it_manages(least: Least) -> None:
    ci, stray = f"User:ci-{uuid.uuid4().hex[:6]}", f"User:stray-{uuid.uuid4().hex[:6]}"
    roles = ("--principal", f"producer={ci}", "--principal", f"agent={ci}")

    first = _apply(least, *roles)
    second = _apply(least, *roles)
    planned = _apply(least, "--principal", f"producer={ci}", "--prune", "--dry-run")
    pruned = _apply(least, "--principal", f"producer={ci}", "--principal", f"operator={stray}", "--prune")
    again = _apply(least, "--principal", f"producer={ci}", "--prune")

    assert first["created"] and not first["deleted"]
    assert (second["created"], second["deleted"], second["kept"]) == ([], [], len(first["created"]))
    assert planned["dry_run"] and planned["deleted"] and not planned["created"]
    assert pruned["deleted"] == planned["deleted"]  # the agent grants of ci went, nobody else's
    assert f"{ci} WRITE TOPIC:{MISSIONS}" not in pruned["deleted"]
    assert (again["created"], again["deleted"]) == ([], [])


def test_acl_apply_by_a_principal_other_than_the_admin_is_refused(least: Least) -> None:
    run = _cli(
        least.settings(Role.OPERATOR), "--principal", "operator=User:least-operator", "--principal", "producer=x"
    )

    assert run.returncode == EXIT_CONFIG
    assert "may not describe or alter the ACLs" in run.stderr and "super.users" in run.stderr


async def test_missions_complete_with_every_process_under_its_own_role(least: Least, tmp_path: Path) -> None:
    roles = {"coordinator": Role.COORDINATOR, "streams": Role.STREAMS}
    operator = least.settings(Role.OPERATOR)
    async with crew(
        least.admin, tmp_path, agents=2, env_of=lambda name: least.env(roles.get(name, Role.AGENT))
    ) as swarm:
        with (tmp_path / "top.log").open("ab") as log:
            top = subprocess.Popen(
                [sys.executable, "-m", "swarmlog", "top"],
                env=os.environ | least.env(Role.TOP),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            mission = tmp_path / "mission.json"
            mission.write_text(json.dumps({"title": "least privilege", "tasks": [task("t0", swarm.capability)]}))
            submitted = await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "swarmlog", "submit", str(mission), "--json"],
                env=os.environ | least.env(Role.PRODUCER),
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert submitted.returncode == 0, submitted.stderr
            placed = json.loads(submitted.stdout)
            split = f"top-{uuid.uuid4().hex[:8]}"
            await MissionClient(least.settings(Role.PRODUCER)).submit(
                {"mission_id": split, "title": split, "region": "top", "tasks": [task("t1", swarm.capability)]}
            )

            async def completed() -> list[Any] | None:
                events = await journal(operator, REGION, placed["mission_id"])
                return events if named(events, MissionCompleted) else None

            events = await eventually(completed, timeout_s=120)
            top_events = await eventually(lambda: ended(operator, split), timeout_s=120)
            assert not swarm.dead() and top.poll() is None, f"processes exited; logs in {tmp_path}"
        finally:
            top.terminate()
            top.wait(30)

    assert placed["served"]  # `submit` read the coordinators' announcements as the producer
    assert [done.success for done in named(events, MissionCompleted)] == [True]
    assert [done.success for done in named(top_events, MissionCompleted)] == [True]
