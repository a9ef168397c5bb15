"""swarmlog processes as containers of the swarmlog image: started, killed with -9, started again, stopped."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from testcontainers.core.container import DockerContainer

from swarmlog.services.docker import container
from swarmlog.services.process import free_ports
from swarmlog.settings import Settings

STOP_TIMEOUT_S = 30


class Containers:
    """`swarmlog <args>` containers of one test, by name, on host networking; `workdir` is mounted at the same path,
    so paths in arguments (data dirs, brain files) mean the same inside; each container's log goes to
    <workdir>/<name>.log when it is stopped."""

    def __init__(self, settings: Settings, image: str, workdir: Path) -> None:
        passed = {key: value for key, value in os.environ.items() if key.startswith("SWARMLOG_")}
        passed.pop("SWARMLOG_CACHE_DIR", None)  # the image keeps its state under /data
        self._env = passed | {
            "SWARMLOG_BROKER": "kafka",
            "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
            "SWARMLOG_REDIS_URL": settings.redis_url or "",
            "HOME": "/tmp",
        }
        self._image, self._workdir = image, workdir
        self.running: dict[str, DockerContainer] = {}
        self.killed: set[str] = set()

    def start(self, name: str, *args: str) -> None:
        """Start `swarmlog <args>` in a new container, as this user (files in workdir stay ours), its metrics on a
        port of its own (the containers share the host's network)."""
        started = container(self._image, network_mode="host", user=f"{os.getuid()}:{os.getgid()}")
        (metrics,) = free_ports(1)
        started.with_envs(**self._env, SWARMLOG_METRICS_PORT=str(metrics)).with_command(list(args))
        started.with_volume_mapping(str(self._workdir), str(self._workdir), "rw")
        self.running[name] = started.start()

    def kill(self, name: str) -> None:
        """kill -9 the container's process: the container stays, exited, as after a crash."""
        self.running[name].get_wrapped_container().kill(signal="SIGKILL")
        self.killed.add(name)

    def restart(self, name: str) -> None:
        """Start a killed container again (same file system: what it wrote to its disk is still there)."""
        self.running[name].get_wrapped_container().start()
        self.killed.discard(name)

    def check(self) -> bool:
        """False; an AssertionError with its log if a container that was not killed has exited."""
        for name, running in self.running.items():
            wrapped = running.get_wrapped_container()
            wrapped.reload()
            if name not in self.killed and wrapped.status == "exited":
                tail = wrapped.logs(tail=30).decode(errors="replace")
                raise AssertionError(f"container {name} exited ({wrapped.attrs['State']['ExitCode']}):\n{tail}")
        return False

    def stop_all(self) -> None:
        """SIGTERM every container (SIGKILL after the timeout), keep its log, and remove it."""
        for name, running in self.running.items():
            wrapped = running.get_wrapped_container()
            with contextlib.suppress(Exception):
                wrapped.stop(timeout=STOP_TIMEOUT_S)
            with contextlib.suppress(Exception):
                (self._workdir / f"{name}.log").write_bytes(wrapped.logs())
            running.stop()
        self.running.clear()
