"""Log lines of the long-running processes: one line an event, with time, level and logger, on stderr.

While a broker is away, aiokafka logs the same connection error many times a second (thousands of lines in one
outage); the `Repeats` filter lets the first of a kind through, then at most one a `window_s`, saying how many it held
back, so an operator reads what the process waits for instead of scrolling past it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET = ("aiokafka", "kafka")  # their INFO is every join and metadata refresh: warnings and above only
REPEAT_WINDOW_S = 10.0


class Repeats(logging.Filter):
    """Passes a message of a kind (logger, level, template) of the `loggers` at most once a window, noting how many
    it held back; every other logger's records pass (swarmlog's own lines, one an event, are never held back)."""

    def __init__(
        self,
        window_s: float = REPEAT_WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
        loggers: tuple[str, ...] = QUIET,
    ) -> None:
        super().__init__()
        self._window_s, self._clock, self._loggers = window_s, clock, loggers
        self._seen: dict[tuple[str, int, str], tuple[float, int]] = {}  # kind -> (last passed at, held back since)

    def filter(self, record: logging.LogRecord) -> bool:
        """True to log the record (annotated with what was held back), False to hold it back."""
        if record.name.split(".", 1)[0] not in self._loggers:
            return True
        kind = (record.name, record.levelno, str(record.msg))
        now = self._clock()
        passed_at, held = self._seen.get(kind, (None, 0))
        if passed_at is not None and now - passed_at < self._window_s:
            self._seen[kind] = (passed_at, held + 1)
            return False
        self._seen[kind] = (now, 0)
        if held and passed_at is not None:
            record.msg = f"{record.msg} ({held} more like this in the last {now - passed_at:.0f} s)"
        return True


def hold_back_repeats(logger: logging.Logger) -> None:
    """A `Repeats` filter on each of the logger's handlers."""
    for handler in logger.handlers:
        handler.addFilter(Repeats())


def configure(level: int = logging.INFO) -> None:
    """swarmlog's loggers at `level`, the clients' at WARNING with their repeats held back; for processes whose
    framework does not set logging up."""
    logging.basicConfig(level=level, format=FORMAT)
    hold_back_repeats(logging.getLogger())
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
