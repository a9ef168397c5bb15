"""`swarmlog submit FILE`: validate a YAML/JSON mission against the MissionSubmitted schema, produce it, print its id."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any

import typer

from swarmlog.artifacts import open_store
from swarmlog.client import MissionClient, MissionInvalid, load_mission
from swarmlog.commands.common import EXIT_USAGE, err, one_line_errors, out, print_json
from swarmlog.commands.status import BootstrapOption, JsonOption, connected
from swarmlog.commands.watch import watch_mission
from swarmlog.coordinator.placement import TOP


@one_line_errors
def submit(
    file: Annotated[Path, typer.Argument(metavar="FILE", help="A mission as .yaml/.yml or .json (see examples/).")],
    wait: Annotated[bool, typer.Option("--wait", help="Follow the mission to its end, like `swarmlog watch`.")] = False,
    region: Annotated[str | None, typer.Option(help="Run it in this region (overrides the file's `region`).")] = None,
    timeout_s: Annotated[float, typer.Option(help="With --wait: give up after this many seconds.")] = 600.0,
    bootstrap: BootstrapOption = None,
    as_json: JsonOption = False,
) -> None:
    """Check the mission first (a bad file is one line naming the field, exit 2), then produce it and print its id."""
    try:
        mission = load_mission(file)
        if region is not None:
            mission["region"] = region
        event = MissionClient.validate_offline(mission)
    except MissionInvalid as exc:
        err.print(f"[red]error:[/red] {file}: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_USAGE) from None
    settings = connected(bootstrap)
    client = MissionClient(settings, client_name="cli")
    mission = dict(mission) | {"mission_id": event.mission_id}
    mission_id, mission_region, served = asyncio.run(_submit(client, mission))
    if mission_region not in served:
        err.print(
            f"[yellow]warning:[/yellow] no coordinator serves {mission_region} now (served: "
            f"{', '.join(served) or 'none'}); the mission waits until one does: start `{_server_of(mission_region)}`",
            highlight=False,
            soft_wrap=True,
        )
    if as_json and not wait:
        print_json({"mission_id": mission_id, "region": mission_region, "served": mission_region in served})
    elif not as_json:
        out.print(mission_id, highlight=False)
    if wait:
        watch_mission(client, open_store(settings), mission_id, mission_region, timeout_s, as_json)


def _server_of(region: str) -> str:
    """The command that serves a region."""
    return "swarmlog top" if region == TOP else f"swarmlog coordinator --region {region}"


async def _submit(client: MissionClient, mission: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    """Place and produce the mission: its id, its region, and the regions served when it was placed."""
    served = await client.served_regions()
    event = await client.placed(mission, served)
    await client.produce(event)
    return event.mission_id, client.region_of(event.mission_id, event.region), served
