"""`swarmlog coordinator`: run one region's coordinator until SIGTERM or Ctrl-C."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from swarmlog.commands.common import one_line_errors
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.metrics import sensor_for
from swarmlog.lifecycle import stop_on_signals
from swarmlog.settings import Settings


STOP_DEADLINE_S = 30.0


@one_line_errors
def coordinator(
    region: Annotated[str, typer.Option(help="region-0 … region-<SWARMLOG_REGIONS - 1>.")] = "region-0",
    bootstrap: Annotated[str | None, typer.Option(help="Kafka bootstrap servers ($SWARMLOG_BOOTSTRAP).")] = None,
    data_dir: Annotated[Path | None, typer.Option(help="Journal snapshot folder (<cache dir>/coordinator).")] = None,
    metrics_port: Annotated[int | None, typer.Option(help="Serve Prometheus /metrics on this port; 0 = off ($SWARMLOG_METRICS_PORT).")] = None,
) -> None:
    """Recover the region from its journal, then decide on missions, results, votes and alerts until SIGTERM."""
    asyncio.run(_serve(Settings.from_env(bootstrap=bootstrap, metrics_port=metrics_port), region, data_dir))


async def _serve(settings: Settings, region: str, data_dir: Path | None) -> None:
    """Run the service until a stop signal; the record in progress is finished and committed first."""
    stop = asyncio.Event()
    stop_on_signals(stop.set, what=f"the {region} coordinator", deadline_s=STOP_DEADLINE_S)
    sensor, server = sensor_for(settings.metrics_port)
    try:
        async with CoordinatorService(settings, region, data_dir=data_dir, sensor=sensor) as service:
            await service.wait(stop)
    finally:
        if server is not None:
            server.close()
