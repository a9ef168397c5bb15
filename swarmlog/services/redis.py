"""Debian's redis-server as a local process on a free port, nothing persisted; optionally on TLS alone, with ACL users."""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

from swarmlog.redis_connection import RedisAccess
from swarmlog.services import process
from swarmlog.services.certs import Issued
from swarmlog.services.endpoints import Redis
from swarmlog.services.probe import redis_answers

READY_LINE = b"Ready to accept connections"


@dataclasses.dataclass(frozen=True)
class RedisTls:
    """A TLS listener: the server's certificate, the CA that clients' certificates are checked against, and whether
    a client must present one (Redis's tls-auth-clients)."""

    server: Issued
    ca_file: Path
    auth_clients: Literal["no", "optional", "yes"] = "optional"


@contextlib.contextmanager
def run_redis(timeout_s: float = 20.0, *, tls: RedisTls | None = None, acl_file: Path | None = None) -> Iterator[Redis]:
    """A fresh redis-server on 127.0.0.1 with no snapshots and no append-only file, its dir removed on exit. With
    `tls` it listens on TLS alone (a rediss:// URL); with `acl_file` its users are that file's (Redis's aclfile)."""
    server = process.require_binary("redis-server", apt_package="redis-server", needed_by="Redis")
    with tempfile.TemporaryDirectory(prefix="swarmlog-redis-") as tmp:
        (port,) = process.free_ports(1)
        log = Path(tmp) / "redis.log"
        argv = [server, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp, "--daemonize", "no"]
        if tls is None:
            url = f"redis://127.0.0.1:{port}/0"
            argv += ["--port", str(port)]
        else:
            url = f"rediss://127.0.0.1:{port}/0"
            argv += ["--port", "0", "--tls-port", str(port), "--tls-cert-file", str(tls.server.cert)]
            argv += ["--tls-key-file", str(tls.server.key), "--tls-ca-cert-file", str(tls.ca_file)]
            argv += ["--tls-auth-clients", tls.auth_clients]
        if acl_file is not None:
            argv += ["--aclfile", str(acl_file)]

        def ready() -> bool:
            # A secured server's PING would need one of its users (and perhaps a client certificate): its log says.
            if tls is None and acl_file is None:
                return redis_answers(RedisAccess(url))
            return log.exists() and READY_LINE in log.read_bytes()

        with process.running(
            argv, name="redis-server", log=log, ready=ready, timeout_s=timeout_s, cwd=Path(tmp)
        ) as redis:
            yield Redis(url=url, child=redis)
