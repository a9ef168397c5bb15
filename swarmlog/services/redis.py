"""Debian's redis-server as a local process on a free port, nothing persisted."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

from swarmlog.services import process
from swarmlog.services.endpoints import Redis
from swarmlog.services.probe import redis_answers


@contextlib.contextmanager
def run_redis(timeout_s: float = 20.0) -> Iterator[Redis]:
    """A fresh redis-server on 127.0.0.1 with no snapshots and no append-only file, its dir removed on exit."""
    server = process.require_binary("redis-server", apt_package="redis-server", needed_by="Redis")
    with tempfile.TemporaryDirectory(prefix="swarmlog-redis-") as tmp:
        (port,) = process.free_ports(1)
        url = f"redis://127.0.0.1:{port}/0"
        argv = [
            server,
            "--bind",
            "127.0.0.1",
            "--port",
            str(port),
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            tmp,
            "--daemonize",
            "no",
        ]
        with process.running(
            argv,
            name="redis-server",
            log=Path(tmp) / "redis.log",
            ready=lambda: redis_answers(url),
            timeout_s=timeout_s,
            cwd=Path(tmp),
        ) as redis:
            yield Redis(url=url, child=redis)
