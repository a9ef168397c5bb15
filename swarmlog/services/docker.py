"""Apache Kafka and Redis in Docker containers (testcontainers), for machines where a Docker engine answers."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

from swarmlog.errors import ServiceError
from swarmlog.services.endpoints import Broker, Redis
from swarmlog.services.kafka import BROKER_CONFIG, KAFKA_VERSION
from swarmlog.services.probe import kafka_answers
from swarmlog.services.process import free_ports

KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
REDIS_IMAGE = "redis:7.4"


def docker_available() -> tuple[bool, str]:
    """Whether a Docker engine answers a ping, and why not when it does not."""
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception as exc:
        return False, f"no Docker engine answers ({type(exc).__name__}: {exc}); start one or set DOCKER_HOST"
    return True, "a Docker engine answers"


def _require_docker() -> None:
    """A ServiceError saying why, unless a Docker engine answers."""
    ok, reason = docker_available()
    if not ok:
        raise ServiceError(f"SWARMLOG_BROKER=docker: {reason}; or use SWARMLOG_BROKER=kafka for Kafka without Docker")


@contextlib.contextmanager
def run_kafka_container(timeout_s: float = 120.0) -> Iterator[Broker]:
    """Apache Kafka's official image, single node KRaft, on a free host port; removed on exit."""
    from testcontainers.core.container import DockerContainer

    _require_docker()
    (port,) = free_ports(1)
    # The advertised listener must be the host port, so it is fixed before the container starts.
    config = {
        **BROKER_CONFIG,
        "controller.quorum.voters": "1@localhost:9093",
        "listeners": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
    }
    container = DockerContainer(KAFKA_IMAGE).with_bind_ports(9092, port)
    container.with_envs(**{"KAFKA_" + key.upper().replace(".", "_"): value for key, value in config.items()})
    with container:
        bootstrap = f"127.0.0.1:{port}"
        deadline = time.monotonic() + timeout_s
        while not kafka_answers(bootstrap):
            if time.monotonic() > deadline:
                logs = b"".join(container.get_logs()).decode(errors="replace")[-4000:]
                raise ServiceError(f"{KAFKA_IMAGE} was not ready after {timeout_s:.0f}s; its log ends:\n{logs}")
            time.sleep(0.2)
        yield Broker(kind="docker", bootstrap=bootstrap, supports_transactions=True)


@contextlib.contextmanager
def run_redis_container() -> Iterator[Redis]:
    """A Redis container on a mapped port; removed on exit."""
    from testcontainers.community.redis import RedisContainer

    _require_docker()
    with RedisContainer(REDIS_IMAGE) as redis:
        host, port = redis.get_container_host_ip(), redis.get_exposed_port(redis.port)
        yield Redis(url=f"redis://{host}:{port}/0")
