"""`swarmlog coordinator`: run one region's coordinator until SIGTERM or Ctrl-C; `coordinator repair`: pass over
journal records that do not decode, as an audited event in the journal."""

from __future__ import annotations

import asyncio
import getpass
from pathlib import Path
from typing import Annotated

import typer

from swarmlog import logs
from swarmlog.commands.common import one_line_errors, out
from swarmlog.commands.status import connected
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.coordinator.shell.repair import describe
from swarmlog.coordinator.shell.repair import repair as record_repair
from swarmlog.coordinator.state import RETAIN_GOODBYE_SLOT_MS, RETAIN_SLOT_MS, START_BACKOFF_MAX, START_TIMEOUT_MS
from swarmlog.lifecycle import stop_on_signals
from swarmlog.metrics import sensor_for
from swarmlog.settings import Settings

STOP_DEADLINE_S = 30.0

app = typer.Typer()
Region = Annotated[str, typer.Option(help="region-0 … region-<SWARMLOG_REGIONS - 1>.")]
Bootstrap = Annotated[str | None, typer.Option(help="Kafka bootstrap servers ($SWARMLOG_BOOTSTRAP).")]


@app.callback(invoke_without_command=True)
@one_line_errors
def coordinator(
    context: typer.Context,
    region: Region = "region-0",
    bootstrap: Bootstrap = None,
    data_dir: Annotated[Path | None, typer.Option(help="Journal snapshot folder (<cache dir>/coordinator).")] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus /metrics on this port; 0 = off ($SWARMLOG_METRICS_PORT).")
    ] = None,
    start_timeout_ms: Annotated[
        int,
        typer.Option(
            min=1,
            envvar="SWARMLOG_COORDINATOR_START_TIMEOUT_MS",
            help="Take an assigned task back, and reassign it, when its agent has not started it within this time "
            f"(default 3x the default heartbeat timeout); each take-back doubles the task's next wait, up to "
            f"{START_BACKOFF_MAX}x.",
        ),
    ] = START_TIMEOUT_MS,
    retain_slot_ms: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="SWARMLOG_COORDINATOR_RETAIN_SLOT_MS",
            help="Release the inbox slot of an agent declared dead this long ago and not back, so another agent may "
            "get it (default 24 h).",
        ),
    ] = RETAIN_SLOT_MS,
    retain_goodbye_slot_ms: Annotated[
        int,
        typer.Option(
            min=0,
            envvar="SWARMLOG_COORDINATOR_RETAIN_GOODBYE_SLOT_MS",
            help="Release the inbox slot of an agent that deregistered (stopped) this long ago and is not back "
            "(default 10 min: a restart within it keeps its slot and checkpoint).",
        ),
    ] = RETAIN_GOODBYE_SLOT_MS,
) -> None:
    """Recover the region from its journal, then decide on missions, results, votes and alerts until SIGTERM.

    It refuses to start (exit 1) on journal records that do not decode, naming each and the `repair` command that
    passes over them."""
    if context.invoked_subcommand is not None:
        return
    logs.configure()
    asyncio.run(
        _serve(
            Settings.from_env(bootstrap=bootstrap, metrics_port=metrics_port),
            region,
            data_dir,
            start_timeout_ms,
            (retain_slot_ms, retain_goodbye_slot_ms),
        )
    )


async def _serve(
    settings: Settings, region: str, data_dir: Path | None, start_timeout_ms: int, retain_slots_ms: tuple[int, int]
) -> None:
    """Run the service until a stop signal; the record in progress is finished and committed first."""
    stop = asyncio.Event()
    stop_on_signals(stop.set, what=f"the {region} coordinator", deadline_s=STOP_DEADLINE_S)
    sensor, server = sensor_for(settings.metrics_port)
    try:
        async with CoordinatorService(
            settings,
            region,
            data_dir=data_dir,
            sensor=sensor,
            start_timeout_ms=start_timeout_ms,
            retain_slot_ms=retain_slots_ms[0],
            retain_goodbye_slot_ms=retain_slots_ms[1],
        ) as service:
            await service.wait(stop)
    finally:
        if server is not None:
            server.close()


@app.command()
@one_line_errors
def repair(
    skip: Annotated[
        list[int],
        typer.Option(
            help="Offset of an undecodable record of the region's journal partition to pass over; repeat for several."
        ),
    ],
    reason: Annotated[str, typer.Option(help="Why they may be passed over; kept in the journal with your name.")],
    region: Region = "region-0",
    operator: Annotated[str | None, typer.Option(help="Who makes the repair (default: your user name).")] = None,
    force: Annotated[
        bool, typer.Option(help="Repair although a coordinator announces that it serves the region.")
    ] = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Record in the journal that undecodable records are passed over, so the region's coordinator starts again.

    Run it while the region's coordinator is stopped: it refuses while a coordinator announces that it serves the
    region (--force overrides), and on Apache Kafka it takes the coordinator's transactional id and so fences a
    coordinator still running. Offsets that decode, or hold no record, are refused (exit 1) and nothing
    is written."""
    if not reason.strip():
        raise typer.BadParameter(
            "say why the records may be passed over; it is kept in the journal", param_hint="--reason"
        )
    settings = connected(bootstrap)
    repaired = asyncio.run(
        record_repair(settings, region, skip, reason.strip(), operator or getpass.getuser(), force=force)
    )
    for line in describe(repaired):
        out.print(line, highlight=False, soft_wrap=True)
