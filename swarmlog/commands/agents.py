"""`swarmlog agents`: every agent in the registry with its slot, capabilities, model, status and heartbeat age."""

from __future__ import annotations

import asyncio
import dataclasses

from rich.table import Table

from swarmlog.commands.common import one_line_errors, out, print_json
from swarmlog.commands.status import BootstrapOption, JsonOption, connected, read_agents

STYLE = {
    "IDLE": "green",
    "BUSY": "cyan",
    "THROTTLED": "yellow",
    "DRAINING": "yellow",
    "SILENT": "red",
    "DEAD": "red",
    "DEREGISTERED": "dim",
}


@one_line_errors
def agents(bootstrap: BootstrapOption = None, as_json: JsonOption = False) -> None:
    """A table of agents: id, region, slot, capabilities, model, status, seconds since the last heartbeat."""
    rows = asyncio.run(read_agents(connected(bootstrap)))
    if as_json:
        print_json([dataclasses.asdict(row) for row in rows])
        return
    table = Table("agent", "region", "slot", "capabilities", "model", "status", "heartbeat age")
    for row in rows:
        age = "-" if row.heartbeat_age_s is None else f"{row.heartbeat_age_s:.1f} s"
        table.add_row(
            row.agent_id,
            row.region,
            str(row.slot),
            ", ".join(row.capabilities),
            row.model,
            f"[{STYLE.get(row.status, '')}]{row.status}[/]",
            age,
        )
    out.print(table if rows else "no agents have registered yet")
