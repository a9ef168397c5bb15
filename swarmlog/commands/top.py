"""`swarmlog top`: run the top level, which splits missions larger than a region across the regions, until SIGTERM."""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from swarmlog import logs
from swarmlog.commands.common import one_line_errors
from swarmlog.commands.status import connected
from swarmlog.coordinator.shell.top import TopService
from swarmlog.coordinator.top import MOVE_AFTER_MS, Config
from swarmlog.lifecycle import stop_on_signals
from swarmlog.settings import Settings

STOP_DEADLINE_S = 30.0


@one_line_errors
def top(
    bootstrap: Annotated[str | None, typer.Option(help="Kafka bootstrap servers ($SWARMLOG_BOOTSTRAP).")] = None,
    move_after_ms: Annotated[
        int,
        typer.Option(
            min=1,
            envvar="SWARMLOG_TOP_MOVE_AFTER_MS",
            help="Move a share to another region once its region has been unserved this long (announcements "
            "stopped or said it stopped).",
        ),
    ] = MOVE_AFTER_MS,
) -> None:
    """Recover from swarm.top.journal, then split every mission submitted to the region `top` across the served
    regions by their idle agents, follow its shares in the regions' journals, move the shares of a region that stops
    answering, and complete the mission on swarm.top.journal (`swarmlog replay state top` shows it)."""
    logs.configure()
    asyncio.run(_serve(connected(bootstrap), Config(move_after_ms)))


async def _serve(settings: Settings, config: Config) -> None:
    """Run the service until a stop signal; the poll in progress is finished and committed first."""
    stop = asyncio.Event()
    stop_on_signals(stop.set, what="the top level", deadline_s=STOP_DEADLINE_S)
    async with TopService(settings, config) as service:
        await service.wait(stop)
