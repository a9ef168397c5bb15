"""Redis secured (issue #14): the memory bus, the streams worker's projection and a whole mission over TLS as an ACL
user granted only memorybus.ACL_RULES, on a real redis-server; and what is refused (a wrong password, an unknown user,
a command outside the grant, an untrusted or expired server certificate, a missing or foreign client certificate),
each failing at once with a message that says what to check, and a CLI exit code of 4."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from experiences import recorded
from faults.mission import crew, results_once

from swarmlog import memorybus, topics
from swarmlog.actors.memory.embeddings import MiniLM
from swarmlog.actors.memory.semantic import SemanticMemory
from swarmlog.envelope import now_ms
from swarmlog.errors import AccessDenied, ConfigError
from swarmlog.kafka.producer import EventProducer
from swarmlog.redis_connection import RedisAccess
from swarmlog.replay.memory import rebuild_memory
from swarmlog.services import Redis
from swarmlog.services.certs import Authority, Issued
from swarmlog.services.redis import RedisTls, run_redis
from swarmlog.settings import Secret, Settings

ROOT = Path(__file__).resolve().parents[1]
ADMIN_PASSWORD = uuid.uuid4().hex


@dataclasses.dataclass(frozen=True)
class Pki:
    """The module's certificates: a CA, the server's and a client's it signed, an expired server certificate, and an
    unrelated CA with a client certificate of its own."""

    ca: Authority
    server: Issued
    client: Issued
    expired: Issued
    stranger: Authority
    stranger_client: Issued


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = Authority.create(tmp_path_factory.mktemp("ca"), "swarmlog test CA")
    stranger = Authority.create(tmp_path_factory.mktemp("stranger"), "someone else's CA")
    return Pki(
        ca,
        ca.server("redis"),
        ca.client("memory"),
        ca.issue("expired-redis", "redis", hosts=("127.0.0.1", "localhost"), expired=True),
        stranger,
        stranger.client("intruder"),
    )


@pytest.fixture(scope="module")
def password_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("secrets") / "redis-password"
    path.write_text(f"{uuid.uuid4().hex}\n")
    return path


@pytest.fixture(scope="module")
def acl_file(password_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Users as production has them: `default` off, `memory` with the bus's rules alone, an admin for the checks."""
    password = password_file.read_text().strip()
    path = tmp_path_factory.mktemp("acl") / "users.acl"
    path.write_text(
        "user default off\n"
        f"user admin on >{ADMIN_PASSWORD} ~* &* +@all\n"
        f"user memory on >{password} {memorybus.ACL_RULES}\n"
    )
    return path


@pytest.fixture(scope="module")
def secured(pki: Pki, acl_file: Path) -> Iterator[Redis]:
    """redis-server on TLS alone, client certificates optional, the ACL file's users."""
    with run_redis(tls=RedisTls(pki.server, pki.ca.cert, "optional"), acl_file=acl_file) as started:
        yield started


@pytest.fixture(scope="module")
def access(secured: Redis, pki: Pki, password_file: Path) -> RedisAccess:
    """The memory user's access to the secured server, with a client certificate (mutual TLS)."""
    password = Secret.from_file(password_file, "SWARMLOG_REDIS_PASSWORD_FILE")
    return RedisAccess(secured.url, "memory", password, pki.ca.cert, pki.client.cert, pki.client.key)


@pytest.fixture(scope="module")
def admin(access: RedisAccess) -> redis.Redis:
    """A blocking client as the admin user, to look at what the memory user wrote."""
    return redis.Redis.from_url(
        access.url, **{**access.options(), "username": "admin", "password": ADMIN_PASSWORD}, decode_responses=True
    )


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM()


def secured_settings(settings: Settings, access: RedisAccess) -> Settings:
    """`settings` with Redis replaced by the secured server, as the memory user."""
    return dataclasses.replace(
        settings,
        redis_url=access.url,
        redis_username=access.username,
        redis_password=access.password,
        redis_ca_file=access.ca_file,
        redis_cert_file=access.cert_file,
        redis_key_file=access.key_file,
    )


def environment(access: RedisAccess) -> dict[str, str]:
    """The SWARMLOG_REDIS_* variables a swarmlog process is given for `access` (the password as its file)."""
    assert access.password is not None and access.password.path is not None
    paths = {"CA_FILE": access.ca_file, "CERT_FILE": access.cert_file, "KEY_FILE": access.key_file}
    return {
        "SWARMLOG_REDIS_URL": access.url,
        "SWARMLOG_REDIS_USERNAME": access.username or "",
        "SWARMLOG_REDIS_PASSWORD_FILE": str(access.password.path),
        **{f"SWARMLOG_REDIS_{name}": str(path) for name, path in paths.items() if path is not None},
    }


async def until(check, timeout_s: float = 30.0):
    """The first truthy result of `check` (awaited), or an AssertionError at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not (result := await check()):
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        await asyncio.sleep(0.1)
    return result


async def test_one_node_recalls_what_another_remembered_over_mutual_tls_as_the_memory_user(model, access, admin):
    content = f"the release train leaves on Thursdays {uuid.uuid4().hex}"
    async with (
        SemanticMemory(access, flush_ms=50, model=model) as reader,
        SemanticMemory(dataclasses.replace(access, cert_file=None, key_file=None), flush_ms=50, model=model) as writer,
    ):
        remembered = recorded(model, content)
        writer.remember(remembered)

        async def recalled() -> bool:
            return [hit.content for hit in await reader.recall(content, k=1)] == [content]

        await until(recalled)
    assert admin.pexpiretime(f"experience:{remembered.experience_id}") == remembered.occurred_at + 3_600_000


def test_the_memory_user_may_not_run_what_the_bus_does_not_need(access, admin):
    admin.set("secret:other", "kept")
    client = redis.Redis.from_url(access.url, **access.options())
    for refused in (client.flushall, lambda: client.get("secret:other"), lambda: client.config_get("*")):
        with pytest.raises(redis.exceptions.NoPermissionError):
            refused()
    with pytest.raises(AccessDenied, match=r"user 'memory' in but not run what swarmlog needs: .*flushall"):
        try:
            client.flushall()
        except redis.RedisError as exc:
            raise access.failure(exc) from exc
    assert admin.get("secret:other") == "kept"


def test_without_a_user_redis_refuses_the_default_one(access):
    with pytest.raises(AccessDenied, match=r"refused user 'default'.*none set: SWARMLOG_REDIS_PASSWORD_FILE"):
        dataclasses.replace(access, username=None, password=None).check()


@pytest.mark.kafka_only
async def test_a_mission_runs_with_the_memory_bus_on_tls_and_the_projection_writes_there(
    own_settings, access, admin, model, tmp_path, monkeypatch
):
    """The streams worker, a coordinator and three scripted agents, every one given only the SWARMLOG_REDIS_*
    variables of the secured server; the agents hydrate their memory from it, the mission completes, an experience
    on the log is projected there by the worker and recalled by a fresh memory, and `replay memory` rebuilds it."""
    for name, value in environment(access).items():
        monkeypatch.setenv(name, value)
    settings = secured_settings(own_settings, access)
    async with crew(settings, tmp_path) as swarm:
        done = await swarm.run_mission(4, fault=lambda _: asyncio.sleep(0), after_results=1)
        results_once(done, 4)
        content = f"the secured bus carries this fact {uuid.uuid4().hex}"
        remembered = recorded(model, content)
        async with EventProducer(settings, client_id="test-secured") as producer:
            await producer.send(topics.EXPERIENCES, remembered, key=remembered.agent_id)
        key = f"experience:{remembered.experience_id}"
        await until(lambda: asyncio.to_thread(admin.exists, key))
        # Every agent follows the bus, and the worker wrote to it, as the memory user, over TLS.
        assert [client["user"] for client in admin.client_list()].count("memory") >= 4
        assert not swarm.dead()
    async with SemanticMemory(access, model=model) as fresh:
        assert [hit.content for hit in await fresh.recall(content, k=1)] == [content]
    admin.delete(key)
    assert (await rebuild_memory(settings, now_ms())).written >= 1
    assert admin.exists(key)


def run_cli(*args: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], float]:
    """`python -m swarmlog <args>` with `env` over this environment: the finished process and its seconds."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "swarmlog", *args],
        env=os.environ | env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return done, time.monotonic() - started


@pytest.mark.kafka_only
def test_an_agent_with_a_wrong_password_exits_4_at_once_naming_its_user(settings, access, tmp_path):
    wrong = tmp_path / "wrong-password"
    wrong.write_text("not-the-password\n")
    env = environment(access) | {
        "SWARMLOG_REDIS_PASSWORD_FILE": str(wrong),
        "SWARMLOG_BROKER": settings.broker,
        "SWARMLOG_BOOTSTRAP": settings.bootstrap,
    }

    done, seconds = run_cli("agent", f"locked-out-{uuid.uuid4().hex[:6]}", "--slot", "61", "--brain", "scripted",
                            "--data-dir", str(tmp_path), env=env)  # fmt: skip

    assert done.returncode == 4, done.stderr
    assert f"Redis at {access.url} refused user 'memory': invalid username-password pair" in done.stderr
    assert f"the password (from {wrong})" in done.stderr and "not-the-password" not in done.stdout + done.stderr
    assert seconds < 60, "no retry loop: a refused password ends the agent at start"


def test_the_streams_worker_with_an_unknown_user_exits_4_before_it_starts(access, tmp_path):
    env = environment(access) | {"SWARMLOG_REDIS_USERNAME": "nobody", "SWARMLOG_STREAMS_DATA_DIR": str(tmp_path)}

    done, _ = run_cli("streams", env=env)

    assert done.returncode == 4, done.stderr
    assert "refused user 'nobody'" in done.stderr and "Check SWARMLOG_REDIS_USERNAME" in done.stderr


async def test_a_server_certificate_from_an_unknown_ca_is_refused(access, pki):
    stranger = dataclasses.replace(access, ca_file=pki.stranger.cert)
    with pytest.raises(AccessDenied, match=r"is not trusted: .*CERTIFICATE_VERIFY_FAILED.*SWARMLOG_REDIS_CA_FILE"):
        await SemanticMemory(stranger).start()


async def test_an_expired_server_certificate_is_refused(access, pki, acl_file):
    with (
        run_redis(tls=RedisTls(pki.expired, pki.ca.cert), acl_file=acl_file) as expired,
        pytest.raises(AccessDenied, match=r"is not trusted: .*certificate has expired"),
    ):
        await SemanticMemory(dataclasses.replace(access, url=expired.url)).start()


async def test_a_server_that_requires_client_certificates_refuses_none_and_a_foreign_one(access, pki, acl_file):
    with run_redis(tls=RedisTls(pki.server, pki.ca.cert, "yes"), acl_file=acl_file) as strict:
        mutual = dataclasses.replace(access, url=strict.url)
        mutual.check()
        for cert in (None, pki.stranger_client):
            refused = dataclasses.replace(mutual, cert_file=cert and cert.cert, key_file=cert and cert.key)
            with pytest.raises(AccessDenied, match="ended this client's TLS connection, which presented"):
                await SemanticMemory(refused).start()


@pytest.mark.parametrize("url", ["redis://memory:hunter2@127.0.0.1:6379/0", "rediss://:hunter2@127.0.0.1:6380/0"])
def test_a_password_in_the_url_is_refused_without_showing_it(url):
    with pytest.raises(ConfigError, match="SWARMLOG_REDIS_PASSWORD_FILE") as refused:
        Settings(redis_url=url)
    assert "hunter2" not in str(refused.value)


def test_tls_files_with_a_plain_redis_url_are_refused(pki):
    with pytest.raises(ConfigError, match="rediss://"):
        Settings(redis_url="redis://127.0.0.1:6379/0", redis_ca_file=pki.ca.cert)


def test_the_operations_guide_gives_the_acl_rules_the_bus_is_tested_with():
    assert memorybus.ACL_RULES in (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
