"""The `swarmlog` program's entry point: a SIGTERM that comes while the commands still load ends it cleanly.

Loading every command's modules takes a second or two, before any command can install its own stop handling; a
stop asked for then (a restart right after a start, an orchestrator scaling down) finds nothing started and nothing
to finish, so it exits 0 rather than dying of the signal. Once loaded, SIGTERM is the default again until a
long-running command takes it over (`swarmlog.lifecycle`).
"""

from __future__ import annotations

import faulthandler
import signal
from types import FrameType
from typing import NoReturn


def _stopped_while_loading(signum: int, frame: FrameType | None) -> NoReturn:
    raise SystemExit(0)


def main() -> None:
    """Load the command line with SIGTERM meaning "stop before starting", then run it."""
    faulthandler.enable()  # a native crash (a model's SIGSEGV) leaves its Python stack in the process's log
    signal.signal(signal.SIGTERM, _stopped_while_loading)
    from swarmlog.cli import app  # every command's imports

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    app()
