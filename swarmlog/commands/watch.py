"""`swarmlog watch MISSION_ID`: a live view of a mission (phase, tasks per agent, consensus, tokens) to its result."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Group
from rich.live import Live
from rich.panel import Panel
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from swarmlog.artifacts import ArtifactStore, open_store, shown
from swarmlog.client import MissionClient, MissionTimeout, outcome
from swarmlog.commands.common import EXIT_FAILED, one_line_errors, out, print_json
from swarmlog.commands.status import BootstrapOption, connected
from swarmlog.coordinator.progress import PROGRESS, MissionProgress
from swarmlog.schemas.events import Event

CHECK_SERVED_S = 2.0


@one_line_errors
def watch(
    mission_id: Annotated[str, typer.Argument(metavar="MISSION_ID", help="The id `swarmlog submit` printed.")],
    region: Annotated[str | None, typer.Option(help="The mission's region (default: found in the journal).")] = None,
    timeout_s: Annotated[float, typer.Option(help="Give up after this many seconds (exit 1).")] = 600.0,
    bootstrap: BootstrapOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="JSON lines: one per journal event, then the result.")
    ] = False,
) -> None:
    """Follow a mission's journal live until it ends; exit 0 only when it completed successfully."""
    settings = connected(bootstrap)
    watch_mission(
        MissionClient(settings, client_name="cli"), open_store(settings), mission_id, region, timeout_s, as_json
    )


def watch_mission(
    client: MissionClient, store: ArtifactStore, mission_id: str, region: str | None, timeout_s: float, as_json: bool
) -> None:
    """Show the mission's progress until it ends, print its result (an output that is an artifact's reference with
    where the artifact is), exit 1 unless it succeeded."""
    if as_json:
        progress = asyncio.run(
            follow(
                client,
                mission_id,
                region,
                timeout_s,
                lambda event, progress: print_json(progress_line(event, progress)),
                lambda note: print_json({"type": "waiting", "mission_id": mission_id} | note),
            )
        )
        print_json(result_document(progress))
    else:
        with Live(render(PROGRESS.initial(mission_id)), console=out, refresh_per_second=8, transient=True) as live:
            progress = asyncio.run(
                follow(
                    client,
                    mission_id,
                    region,
                    timeout_s,
                    lambda _, progress: live.update(render(progress)),
                    lambda note: live.console.print(note["message"], highlight=False),
                )
            )
        out.print(render(progress, store))
    if not progress.succeeded:
        raise typer.Exit(EXIT_FAILED)


async def follow(
    client: MissionClient,
    mission_id: str,
    region: str | None,
    timeout_s: float,
    shown: Callable[[Event, MissionProgress], Any],
    waiting: Callable[[dict[str, Any]], Any],
) -> MissionProgress:
    """The mission's progress at its terminal event, calling `shown` after each of its journal events; meanwhile
    call `waiting` whenever the mission's region becomes unserved (or served again)."""
    progress = PROGRESS.initial(mission_id)
    try:
        async with asyncio.timeout(timeout_s):
            region = region or await client.locate(mission_id)
            noticing = asyncio.create_task(_notice_unserved(client, region, waiting))
            try:
                async for event, progress in client.progress(mission_id, region):
                    shown(event, progress)
            finally:
                noticing.cancel()
    except TimeoutError:
        raise MissionTimeout(
            f"mission {mission_id} did not end within {timeout_s:.0f} s (phase {progress.phase}); run "
            f"`swarmlog watch {mission_id}` again or check `swarmlog status`"
        ) from None
    return progress


async def _notice_unserved(client: MissionClient, region: str, waiting: Callable[[dict[str, Any]], Any]) -> None:
    """Every CHECK_SERVED_S until cancelled (the mission ended): say when no live coordinator serves its region, and
    when one does again."""
    was_served = True
    while True:
        is_served = region in await client.served_regions()
        if is_served != was_served:
            message = f"waiting: no coordinator serves {region}" if not is_served else f"{region} is served again"
            waiting({"region": region, "served": is_served, "message": message})
            was_served = is_served
        await asyncio.sleep(CHECK_SERVED_S)


def progress_line(event: Event, progress: MissionProgress) -> dict[str, Any]:
    """One JSON line of --json: the journal event's name and time, and the progress after it."""
    return {"type": "progress", "event": event.name, "occurred_at_ms": event.occurred_at} | progress.summary()


def result_document(progress: MissionProgress) -> dict[str, Any]:
    """The final JSON line: the terminal event's fields."""
    result = progress.result
    assert result is not None, "follow returns only after the terminal event"
    return {
        "type": "result",
        "mission_id": progress.mission_id,
        "mission": result.name,
        "success": progress.succeeded,
    } | outcome(result)


def render(progress: MissionProgress, store: ArtifactStore | None = None) -> Group:
    """The live view: header, a bar of finished replicas, each task's cross-check, tasks per agent, consensus and tokens;
    the result at the end, its outputs' artifacts looked up in `store` when given."""
    finished = sum(progress.done.values()) + sum(progress.failed.values())
    header = Table.grid(padding=(0, 2))
    header.add_row(Text(f"mission {progress.mission_id}", style="bold"), Text(progress.title))
    header.add_row("phase", Text(progress.phase, style=_phase_style(progress)))
    header.add_row(
        "tasks",
        Group(
            ProgressBar(total=max(progress.planned, finished, 1), completed=finished, width=30),
            Text(
                f"{finished}/{progress.planned} done or failed, {progress.assigned} assigned, {progress.queued} queued"
            ),
        ),
    )
    for task_id, check in sorted(progress.checks.items()):
        header.add_row(f"cross-check {task_id}", check)
    header.add_row("consensus", progress.consensus or (f"{progress.votes} votes" if progress.votes else "-"))
    header.add_row("tokens", str(progress.tokens))
    agents = Table("agent", "done", "failed", title="tasks per agent", title_justify="left")
    for agent in sorted(set(progress.done) | set(progress.failed)):
        agents.add_row(agent, str(progress.done.get(agent, 0)), str(progress.failed.get(agent, 0)))
    parts: list[Any] = [header, agents]
    if progress.result is not None:
        said = outcome(progress.result)
        lines = [f"{name}: {value}" for name, value in said.items() if name != "outputs"]
        lines += [
            f"output {index}: {output if store is None else shown(output, store)}"
            for index, output in enumerate(said.get("outputs", []))
        ]
        parts.append(
            Panel(
                Text("\n".join(lines)),
                title=f"{progress.result.name}",
                border_style="green" if progress.succeeded else "red",
            )
        )
    return Group(*parts)


def _phase_style(progress: MissionProgress) -> str:
    """Green when it completed, red when it failed, yellow while it runs."""
    if progress.result is None:
        return "yellow"
    return "green" if progress.succeeded else "red"
