"""The Docker engine: whether one answers, and starting or stopping the one swarmlog started (never another).

`swarmlog docker start` and `make test` start Debian's `dockerd` when no engine answers and this process runs as
root. That daemon has no bridge and touches no iptables: containers run with host networking, so test traffic stays
on the loopback. Its pid is recorded under the cache dir, and `swarmlog docker stop` stops only the daemon whose pid
is recorded there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from swarmlog.errors import ServiceError
from swarmlog.services import process

DAEMON_OPTIONS = ("--bridge=none", "--iptables=false", "--ip-forward=false", "--ip-masq=false")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def engine_answers(timeout_s: float = 3.0) -> tuple[bool, str]:
    """Whether a Docker engine answers a ping (DOCKER_HOST, else the default socket), and why not when it does not."""
    try:
        import docker

        docker.from_env(timeout=timeout_s).ping()
    except Exception as exc:
        return False, f"no Docker engine answers ({type(exc).__name__}: {exc})"
    return True, "a Docker engine answers"


def pid_file(state_dir: Path) -> Path:
    """Where the pid of the daemon swarmlog started is recorded."""
    return state_dir / "dockerd.pid"


def why_not_startable() -> str | None:
    """Why this process cannot start a Docker daemon (None when it can)."""
    if os.environ.get("DOCKER_HOST"):
        return f"DOCKER_HOST={os.environ['DOCKER_HOST']} names another engine; start that one"
    if os.geteuid() != 0:
        return "starting dockerd needs root; start the Docker service yourself or run as root"
    if shutil.which("dockerd") is None:
        return "dockerd is not installed (Debian: apt-get install docker.io)"
    return None


def start_engine(state_dir: Path) -> bool:
    """Start dockerd unless an engine answers; True when this call started it. ServiceError says why it could not."""
    if engine_answers()[0]:
        return False
    reason = why_not_startable()
    if reason is not None:
        raise ServiceError(f"no Docker engine answers, and swarmlog cannot start one: {reason}")
    state_dir.mkdir(parents=True, exist_ok=True)
    log = state_dir / "dockerd.log"
    with log.open("ab") as out:
        daemon = subprocess.Popen(
            ["dockerd", *DAEMON_OPTIONS, "--pidfile", str(state_dir / "dockerd.own.pid")],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # it outlives this command, as a service does
        )
    pid_file(state_dir).write_text(f"{daemon.pid}\n")
    deadline = time.monotonic() + START_TIMEOUT_S
    while not engine_answers(timeout_s=1.0)[0]:
        if daemon.poll() is not None or time.monotonic() > deadline:
            stop_engine(state_dir)
            raise ServiceError(f"dockerd did not come up; {log} ends:\n{process.log_tail(log)}")
        time.sleep(0.2)
    return True


def stop_engine(state_dir: Path) -> bool:
    """Stop the daemon recorded as started by swarmlog (SIGTERM, then SIGKILL); True when there was one running."""
    recorded = pid_file(state_dir)
    try:
        pid = int(recorded.read_text())
    except (OSError, ValueError):
        return False
    stopped = _terminate(pid) if _is_dockerd(pid) else False
    recorded.unlink(missing_ok=True)
    return stopped


def _is_dockerd(pid: int) -> bool:
    """Whether `pid` is a running dockerd (a recorded pid may have been reused by another process since)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "dockerd"
    except OSError:
        return False


def _terminate(pid: int) -> bool:
    """SIGTERM `pid`, wait for it to exit, SIGKILL it past the timeout."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while _is_dockerd(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    return True
