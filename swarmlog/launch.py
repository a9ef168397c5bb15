"""The `swarmlog` program's entry point: a SIGTERM that comes while the commands still load ends it cleanly.

Loading every command's modules takes a second or two, before any command can install its own stop handling; a
stop asked for then (a restart right after a start, an orchestrator scaling down) finds nothing started and nothing
to finish, so it exits 0 once loading ends rather than dying of the signal. The handler only notes the request: an
exception raised from it would be swallowed where the signal lands in a finalizer or an import lock's callback
("Exception ignored in ..."), and the stop would be lost. Once loaded, SIGTERM is the default again until a
long-running command takes it over (`swarmlog.lifecycle`).
"""

from __future__ import annotations

import faulthandler
import signal
import sys
from types import FrameType


class _StopRequest:
    """Whether a SIGTERM came while the commands loaded."""

    asked = False

    def note(self, signum: int, frame: FrameType | None) -> None:
        """Remember the stop; acted on when loading ends."""
        self.asked = True


def main() -> None:
    """Load the command line with SIGTERM meaning "stop before starting", then run it."""
    faulthandler.enable()  # a native crash (a model's SIGSEGV) leaves its Python stack in the process's log
    request = _StopRequest()
    signal.signal(signal.SIGTERM, request.note)
    from swarmlog.cli import app  # every command's imports

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if request.asked:
        sys.exit(0)
    app()
