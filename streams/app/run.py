"""Running the worker: create the catalog's topics, then run the Faust app until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
from typing import NoReturn

import faust

from swarmlog.kafka.admin import ensure_topics

from .build import build_app
from .config import StreamsConfig


def run_worker(config: StreamsConfig, loglevel: str = "INFO") -> NoReturn:
    """Ensure the topics, then run the worker in the foreground; SIGTERM or SIGINT stops it cleanly (exit 0)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    loop.run_until_complete(ensure_topics(config.settings))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    worker = faust.Worker(build_app(config), loop=loop, loglevel=logging.getLevelName(loglevel.upper()),
                          redirect_stdouts=False)
    worker.execute_from_commandline()
