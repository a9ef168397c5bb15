"""Serving the console: the feed started, the web application served by uvicorn until SIGINT or SIGTERM."""

from __future__ import annotations

import logging

import uvicorn

from swarmlog.console.access import ConsoleSettings
from swarmlog.console.app import application
from swarmlog.console.feed import Feed
from swarmlog.errors import ServiceError
from swarmlog.settings import Settings

log = logging.getLogger("swarmlog.console")
GRACE_S = 2
"""Open streams are closed this long after a stop is asked for."""


async def serve(settings: Settings, access: ConsoleSettings) -> None:
    """Fold the log and serve the console until stopped; a ServiceError when it cannot listen."""
    async with Feed(settings) as feed:
        config = uvicorn.Config(
            application(feed, access),
            host=access.host,
            port=access.port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=GRACE_S,
        )
        server = uvicorn.Server(config)
        log.info(
            "console at %s (read-only; %s), reading %s",
            access.url,
            "token required" if access.token else "this machine only",
            settings.bootstrap,
        )
        await server.serve()
        if not server.started:
            raise ServiceError(f"the console could not listen on {access.host}:{access.port}; is the port in use?")
