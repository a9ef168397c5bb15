"""Child processes for local services: free ports, spawn with no orphans, wait until ready, stop."""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from swarmlog.errors import ServiceError

_PR_SET_PDEATHSIG = 1


def free_ports(count: int = 1) -> list[int]:
    """`count` distinct TCP ports on 127.0.0.1 that nothing listens on right now."""
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def require_binary(name: str, *, apt_package: str, needed_by: str) -> str:
    """The path of an executable on PATH, or a ServiceError naming the Debian package to install."""
    path = shutil.which(name)
    if path is None:
        raise ServiceError(
            f"{needed_by} needs `{name}`, which is not on PATH; install it with `apt-get install {apt_package}`"
        )
    return path


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file, or a note that there is none."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    return "\n".join(text.splitlines()[-lines:]) or f"(empty log at {path})"


def _die_with_parent(parent_pid: int) -> Callable[[], None]:
    """A preexec_fn that makes the child get SIGKILL when the thread that spawned it dies."""
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up before fork: the child only calls it

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        # The parent may have died between fork and prctl; then nobody would send the signal.
        if os.getppid() != parent_pid:
            os.kill(os.getpid(), signal.SIGKILL)

    return preexec


def stop(process: subprocess.Popen[bytes], timeout_s: float = 10.0) -> None:
    """SIGTERM the process group, wait, then SIGKILL it; idempotent."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        if process.poll() is not None:
            break
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(wait_s)
    # Anything the service forked into its group goes with it.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


def run_once(argv: Sequence[str], *, what: str, log: Path, timeout_s: float = 120.0) -> None:
    """Run a set-up command to completion, its output appended to `log`; ServiceError with the tail if it fails."""
    with log.open("ab") as out:
        try:
            result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s, check=False)
        except subprocess.TimeoutExpired:
            raise ServiceError(f"{what} did not finish in {timeout_s:.0f}s:\n{log_tail(log)}") from None
    if result.returncode != 0:
        raise ServiceError(f"{what} failed (exit {result.returncode}):\n{log_tail(log)}")


@contextlib.contextmanager
def running(
    argv: Sequence[str],
    *,
    name: str,
    log: Path,
    ready: Callable[[], bool],
    timeout_s: float = 60.0,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[subprocess.Popen[bytes]]:
    """A service process, in its own process group and killed with its parent, from ready until exit.

    Spawn from the thread that will outlive the service: PR_SET_PDEATHSIG fires when that thread ends.
    """
    with log.open("ab") as out:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=_die_with_parent(os.getpid()),
        )
    try:
        _wait_ready(process, name=name, log=log, ready=ready, timeout_s=timeout_s)
        yield process
    finally:
        stop(process)


def _wait_ready(
    process: subprocess.Popen[bytes], *, name: str, log: Path, ready: Callable[[], bool], timeout_s: float
) -> None:
    """Poll `ready` until it answers True; ServiceError with the log's tail if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        if process.poll() is not None:
            raise ServiceError(
                f"{name} exited with code {process.returncode} while starting; its log {log} ends:\n{log_tail(log)}"
            )
        if ready():
            return
        if time.monotonic() > deadline:
            raise ServiceError(f"{name} was not ready after {timeout_s:.0f}s; its log {log} ends:\n{log_tail(log)}")
        time.sleep(0.1)
