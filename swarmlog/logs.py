"""Log lines of the long-running processes: one line an event, with time, level and logger, on stderr."""

from __future__ import annotations

import logging

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
QUIET = ("aiokafka", "kafka")  # their INFO is every join and metadata refresh: warnings and above only


def configure(level: int = logging.INFO) -> None:
    """swarmlog's loggers at `level`, the clients' at WARNING; for processes whose framework does not set logging up."""
    logging.basicConfig(level=level, format=FORMAT)
    for name in QUIET:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
