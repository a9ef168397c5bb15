"""Child processes for local services: free ports, spawn with no orphans, wait until ready, stop, say how they died."""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
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


@dataclasses.dataclass(frozen=True)
class Child:
    """A process swarmlog started: its name, the Popen, and the file its output goes to."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    @property
    def pid(self) -> int:
        """The child's process id."""
        return self.popen.pid

    def death(self, lines: int = 20) -> str | None:
        """None while the child runs; once it has exited, how (code or signal) and the last lines of its log."""
        if self.popen.poll() is None:
            return None
        return (
            f"{self.name} {describe_exit(self.popen.returncode)}; its log {self.log} ends:\n{log_tail(self.log, lines)}"
        )


def describe_exit(returncode: int) -> str:
    """An exit status in words: 'exited with code 1', or 'was killed by SIGSEGV (signal 11)'."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "an unknown signal"
    return f"was killed by {name} (signal {-returncode})"


FATAL = "Fatal Python error"  # how faulthandler starts the report of a crash; the stack follows it


def log_tail(path: Path, lines: int = 40) -> str:
    """The last lines of a log file (from faulthandler's crash report on, when it has one), or a note that there is
    none."""
    try:
        kept = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    crash = max((index for index, line in enumerate(kept) if line.startswith(FATAL)), default=None)
    if crash is not None:
        kept = kept[crash : crash + lines]  # the crash and the innermost frames, where the stack says most
    return "\n".join(kept[-lines:]) or f"(empty log at {path})"


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
    stop_all([process], timeout_s)


def stop_all(processes: Sequence[subprocess.Popen[bytes]], timeout_s: float = 10.0) -> None:
    """SIGTERM every process group at once, wait for all within `timeout_s`, then SIGKILL what is left; idempotent."""
    for sig, wait_s in ((signal.SIGTERM, timeout_s), (signal.SIGKILL, 5.0)):
        alive = [process for process in processes if process.poll() is None]
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        deadline = time.monotonic() + wait_s
        for process in alive:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(max(0.0, deadline - time.monotonic()))
    for process in processes:  # anything a service forked into its group goes with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)


def run_once(
    argv: Sequence[str], *, what: str, log: Path, timeout_s: float = 120.0, env: Mapping[str, str] | None = None
) -> None:
    """Run a set-up command to completion, its output appended to `log`; ServiceError with the tail if it fails."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        try:
            result = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout_s, check=False, env=env)
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
) -> Iterator[Child]:
    """A service process, in its own process group and killed with its parent, from ready until exit.

    Spawn from the thread that will outlive the service: PR_SET_PDEATHSIG fires when that thread ends.
    """
    child = spawn(argv, name=name, log=log, cwd=cwd, env=env)
    try:
        _wait_ready(child, ready=ready, timeout_s=timeout_s)
        yield child
    finally:
        stop(child.popen)


def spawn(
    argv: Sequence[str], *, name: str, log: Path, cwd: Path | None = None, env: Mapping[str, str] | None = None
) -> Child:
    """Start a process in its own process group, its output appended to `log`, killed when this thread dies."""
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
    return Child(name, process, log)


def _wait_ready(child: Child, *, ready: Callable[[], bool], timeout_s: float) -> None:
    """Poll `ready` until it answers True; ServiceError with the log's tail if the process dies or time runs out."""
    deadline = time.monotonic() + timeout_s
    while True:
        death = child.death(lines=40)
        if death is not None:
            raise ServiceError(f"while starting, {death}")
        if ready():
            return
        if time.monotonic() > deadline:
            raise ServiceError(
                f"{child.name} was not ready after {timeout_s:.0f}s; its log {child.log} ends:\n{log_tail(child.log)}"
            )
        time.sleep(0.1)
