"""Fixture layer: Apache Kafka, Tansu, Redis, Docker containers or external services behind one interface."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from swarmlog.redis_connection import RedisAccess
from swarmlog.services.docker import run_kafka_container, run_redis_container
from swarmlog.services.endpoints import Broker, Redis, Services
from swarmlog.services.kafka import KafkaCluster, KafkaNode, run_kafka, run_kafka_cluster
from swarmlog.services.redis import run_redis
from swarmlog.services.tansu import run_tansu
from swarmlog.settings import Settings, require_reachable

__all__ = [
    "Broker",
    "KafkaCluster",
    "KafkaNode",
    "Redis",
    "Services",
    "open_broker",
    "open_redis",
    "open_services",
    "run_kafka",
    "run_kafka_cluster",
]


@contextlib.contextmanager
def open_broker(settings: Settings) -> Iterator[Broker]:
    """The broker `settings.broker` asks for: started here (kafka, tansu, docker) or checked reachable (external)."""
    if settings.broker == "external":
        assert settings.bootstrap is not None  # Settings refuses external without a bootstrap
        require_reachable(settings.bootstrap)
        # Unknown broker: assume real Kafka; swarmlog stays correct without transactions anyway.
        yield Broker(kind="external", bootstrap=settings.bootstrap, supports_transactions=True)
        return
    starters: dict[str, Callable[[], contextlib.AbstractContextManager[Broker]]] = {
        "kafka": lambda: run_kafka(settings.cache_dir),
        "tansu": run_tansu,
        "docker": lambda: run_kafka_container(settings),
    }
    with starters[settings.broker]() as broker:
        yield broker


@contextlib.contextmanager
def open_redis(settings: Settings) -> Iterator[Redis]:
    """Redis at SWARMLOG_REDIS_URL when set (checked with PING as the configured user), else a container (docker) or
    a local redis-server."""
    access = RedisAccess.of(settings)
    if access is not None:
        access.check()
        yield Redis(url=access.url)
        return
    with run_redis_container(settings) if settings.broker == "docker" else run_redis() as redis:
        yield redis


@contextlib.contextmanager
def open_services(settings: Settings) -> Iterator[Services]:
    """The broker and Redis the settings ask for, stopped in reverse order on exit."""
    with open_broker(settings) as broker, open_redis(settings) as redis:
        yield Services(broker=broker, redis=redis)
