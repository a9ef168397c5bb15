"""Apache Kafka and Redis in Docker containers (testcontainers), for machines where a Docker engine answers.

Images: by default the ones built here (`make images`, swarmlog.services.images), run with host networking on free
loopback ports, so test traffic never leaves the loopback and no registry is pulled. SWARMLOG_IMAGES=official runs
Docker Hub's apache/kafka and redis instead, with mapped ports, where a machine can pull them.

Ryuk, testcontainers' reaper, is off (it is itself an image from Docker Hub): every container carries the LABEL,
whose value is the pid of the process that started it; it is removed when its block ends, and `remove_orphans`
removes what a killed run left behind, never the containers of another run that is still going.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from swarmlog.errors import ServiceError
from swarmlog.redis_connection import RedisAccess
from swarmlog.services import images
from swarmlog.services.endpoints import Broker, Redis
from swarmlog.services.engine import engine_answers
from swarmlog.services.kafka import BROKER_CONFIG, KAFKA_VERSION, cluster_id
from swarmlog.services.probe import kafka_answers, redis_answers
from swarmlog.services.process import free_ports
from swarmlog.settings import Settings

if TYPE_CHECKING:  # testcontainers and the docker SDK are imported only where containers run (~0.4 s)
    from testcontainers.core.container import DockerContainer

OFFICIAL = {"kafka": f"apache/kafka:{KAFKA_VERSION}", "redis": "redis:7.4"}
LABEL = "org.swarmlog.suite"
log = logging.getLogger("swarmlog.services")
READY_TIMEOUT_S = 120.0


def docker_available() -> tuple[bool, str]:
    """Whether a Docker engine answers a ping, and why not when it does not."""
    ok, reason = engine_answers()
    return ok, reason if ok else f"{reason}; start one (`swarmlog docker start` as root) or set DOCKER_HOST"


def _require_docker() -> None:
    """A ServiceError saying why, unless a Docker engine answers."""
    ok, reason = docker_available()
    if not ok:
        raise ServiceError(f"SWARMLOG_BROKER=docker: {reason}; or use SWARMLOG_BROKER=kafka for Kafka without Docker")


def image_for(settings: Settings, name: str) -> str:
    """The image to run for `name`: built here (made when missing), or the official one."""
    if settings.images == "official":
        return OFFICIAL[name]
    return images.ensure([name], settings.cache_dir, log.warning)[name]


def container(image: str, **kwargs: object) -> DockerContainer:
    """A testcontainers DockerContainer of `image`, labelled as the suite's, with these docker-run options."""
    from testcontainers.core.config import testcontainers_config
    from testcontainers.core.container import DockerContainer

    testcontainers_config.ryuk_disabled = True
    return DockerContainer(image).with_kwargs(labels={LABEL: str(os.getpid())}, **kwargs)


def remove_orphans() -> int:
    """Remove the containers labelled by this process or by a process that no longer runs; how many there were.

    A label that is not a pid (docker-compose.yml's ci profile run by hand says `manual`) is never removed."""
    import docker

    found = docker.from_env().containers.list(all=True, filters={"label": LABEL})
    owned = [box for box in found if _orphaned(box.labels.get(LABEL, ""))]
    for leftover in owned:
        leftover.remove(force=True, v=True)
    return len(owned)


def _orphaned(owner: str) -> bool:
    """Whether a label names this process, or a process that has ended."""
    if not owner.isdigit():
        return False
    return int(owner) == os.getpid() or not Path(f"/proc/{owner}").exists()


def _wait_until(ready: Callable[[], bool], running: DockerContainer, what: str) -> None:
    """Poll `ready` until true; a ServiceError with the container's log when it exits or the timeout passes."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not ready():
        wrapped = running.get_wrapped_container()
        wrapped.reload()
        if wrapped.status == "exited" or time.monotonic() > deadline:
            logs = b"".join(running.get_logs()).decode(errors="replace")[-4000:]
            raise ServiceError(f"{what} was not ready ({wrapped.status}); its log ends:\n{logs}")
        time.sleep(0.2)


def kafka_environment(port: int, controller_port: int, *, host_network: bool) -> Mapping[str, str]:
    """The KAFKA_* variables of a single-node KRaft broker advertised as 127.0.0.1:`port`."""
    listen = "127.0.0.1" if host_network else ""
    inner_port, inner_controller = (port, controller_port) if host_network else (9092, 9093)
    config = {
        **BROKER_CONFIG,
        "controller.quorum.voters": f"1@{listen or 'localhost'}:{inner_controller}",
        "listeners": f"PLAINTEXT://{listen}:{inner_port},CONTROLLER://{listen}:{inner_controller}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
    }
    return {"KAFKA_" + key.upper().replace(".", "_"): value for key, value in config.items()}


@contextlib.contextmanager
def run_kafka_container(settings: Settings) -> Iterator[Broker]:
    """A single-node KRaft Kafka container on a free loopback port; removed on exit."""
    _require_docker()
    image = image_for(settings, "kafka")
    port, controller_port = free_ports(2)
    official = settings.images == "official"
    options: dict[str, object] = {} if official else {"network_mode": "host"}
    running = container(image, **options)
    running.with_envs(**kafka_environment(port, controller_port, host_network=not official), CLUSTER_ID=cluster_id())
    if official:
        running.with_bind_ports(9092, port)
    with running:
        bootstrap = f"127.0.0.1:{port}"
        _wait_until(lambda: kafka_answers(bootstrap), running, f"Kafka container {image}")
        yield Broker(kind="docker", bootstrap=bootstrap, supports_transactions=True)


@contextlib.contextmanager
def run_redis_container(settings: Settings) -> Iterator[Redis]:
    """A Redis container on a free loopback port, persisting nothing; removed on exit."""
    _require_docker()
    image = image_for(settings, "redis")
    (port,) = free_ports(1)
    official = settings.images == "official"
    if official:
        running = container(image).with_bind_ports(6379, port)
    else:
        running = container(image, network_mode="host").with_command(
            f"--port {port} --bind 127.0.0.1 --save '' --appendonly no"
        )
    with running:
        url = f"redis://127.0.0.1:{port}/0"
        _wait_until(lambda: redis_answers(RedisAccess(url)), running, f"Redis container {image}")
        yield Redis(url=url)
