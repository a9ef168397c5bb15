"""`swarmlog console`: the read-only operator console in the browser."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from swarmlog import logs
from swarmlog.commands.common import one_line_errors
from swarmlog.commands.status import BootstrapOption, connected
from swarmlog.console.access import DEFAULT_HOST, DEFAULT_PORT, ConsoleSettings
from swarmlog.console.server import serve


@one_line_errors
def console(
    bootstrap: BootstrapOption = None,
    host: Annotated[
        str | None,
        typer.Option(
            help=f"Address to listen on (default {DEFAULT_HOST}, or $SWARMLOG_CONSOLE_HOST); "
            "any other than the loopback needs a token."
        ),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help=f"Port to listen on (default {DEFAULT_PORT}, or $SWARMLOG_CONSOLE_PORT).")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            help="Token a browser must give (default $SWARMLOG_CONSOLE_TOKEN, which keeps it out of the process list)."
        ),
    ] = None,
) -> None:
    """Serve the operator console: the swarm, missions and their timelines, dead letters, live from the log."""
    access = ConsoleSettings.from_env(host=host, port=port, token=token)  # refused before anything starts
    settings = connected(bootstrap)
    logs.configure()
    asyncio.run(serve(settings, access))
