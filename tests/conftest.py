"""Shared session fixtures: the real services every integration test runs on."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Iterator

import pytest

from swarmlog.kafka.admin import ensure_topics
from swarmlog.services import Broker, Redis, open_broker, open_redis
from swarmlog.services.docker import docker_available, remove_orphans
from swarmlog.settings import Settings

# The suite runs a four-region deployment (its multi-region tests use region-0 … region-3), in this process and in
# every swarmlog process it starts; the product's default is one region.
os.environ.setdefault("SWARMLOG_REGIONS", "4")


def _broker_kinds(kafka_only: bool) -> list[str]:
    """The brokers to test on: SWARMLOG_BROKER (external if only SWARMLOG_BOOTSTRAP is set), else kafka and tansu."""
    chosen = os.environ.get("SWARMLOG_BROKER") or ("external" if os.environ.get("SWARMLOG_BOOTSTRAP") else "")
    kinds = [chosen] if chosen else ["kafka", "tansu"]
    return [kind for kind in kinds if kind != "tansu"] if kafka_only else kinds


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Run every test that uses `broker` once per broker kind; `kafka_only` tests skip Tansu."""
    if "broker" in metafunc.fixturenames:
        kafka_only = metafunc.definition.get_closest_marker("kafka_only") is not None
        metafunc.parametrize("broker", _broker_kinds(kafka_only), indirect=True, scope="session")


@pytest.fixture(scope="session", autouse=True)
def no_containers_left() -> Iterator[None]:
    """The suite's containers (by their label) removed before and after the session: none outlives it, nor one that a
    killed run left behind; a suite running beside this one keeps its own."""
    if docker_available()[0]:
        remove_orphans()
    yield
    if docker_available()[0]:
        remove_orphans()


@pytest.fixture(scope="session")
def broker(request: pytest.FixtureRequest) -> Iterator[Broker]:
    """A started broker of the kind the test is parametrized with, shared by the whole session."""
    settings = dataclasses.replace(Settings.from_env(), broker=request.param)
    with open_broker(settings) as started:
        yield started


@pytest.fixture(scope="session")
def redis_server() -> Iterator[Redis]:
    """A Redis server for the session: SWARMLOG_REDIS_URL when set, else a local redis-server."""
    with open_redis(Settings.from_env()) as started:
        yield started


@pytest.fixture(scope="session")
def redis_url(redis_server: Redis) -> str:
    """The URL of the session's Redis server."""
    return redis_server.url


@pytest.fixture(scope="session")
def settings(broker: Broker, redis_url: str) -> Settings:
    """Settings pointing at the session's broker and Redis, every catalog topic created once."""
    configured = dataclasses.replace(
        Settings.from_env(), broker=broker.kind, bootstrap=broker.bootstrap, redis_url=redis_url
    )
    asyncio.run(ensure_topics(configured))
    return configured


@pytest.fixture(scope="module")
def own_broker(broker: Broker) -> Iterator[Broker]:
    """A fresh broker of the session broker's kind for one test module: no other module's coordinators on it."""
    if broker.kind == "external":
        yield broker
        return
    with open_broker(dataclasses.replace(Settings.from_env(), broker=broker.kind, bootstrap=None)) as fresh:
        yield fresh


@pytest.fixture
async def own_settings(own_broker: Broker) -> Settings:
    """Settings for the module's own broker, its topics ensured."""
    configured = dataclasses.replace(Settings.from_env(), broker=own_broker.kind, bootstrap=own_broker.bootstrap)
    await ensure_topics(configured)
    return configured
