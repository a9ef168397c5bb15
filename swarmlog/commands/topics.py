"""`swarmlog topics`: show the catalog, create or check the topics on a broker."""

from __future__ import annotations

import asyncio
import dataclasses

import typer
from rich.table import Table

from swarmlog.commands.common import EXIT_FAILED, one_line_errors, out, print_json
from swarmlog.kafka.admin import ensure_topics
from swarmlog.settings import Settings
from swarmlog.topics import catalog

app = typer.Typer(no_args_is_help=True, help="The topic catalog: list it, or create and check it on a broker.")

BootstrapOption = typer.Option(None, "--bootstrap", help="Kafka bootstrap servers (default: $SWARMLOG_BOOTSTRAP).")
JsonOption = typer.Option(False, "--json", help="Print JSON instead of a table.")


@app.command("ensure")
@one_line_errors
def ensure(
    bootstrap: str | None = BootstrapOption,
    as_json: bool = JsonOption,
    grow_inbox: bool = typer.Option(
        False,
        "--grow-inbox",
        help="Add inbox partitions up to SWARMLOG_INBOX_PARTITIONS (Kafka only; no message moves), then restart the "
        "coordinators so that they allocate slots from them.",
    ),
) -> None:
    """Create every missing topic with its configuration and check the existing ones; safe to run again."""
    settings = Settings.from_env(bootstrap=bootstrap)
    outcomes = asyncio.run(ensure_topics(settings, grow_inbox=grow_inbox))
    if as_json:
        print_json([dataclasses.asdict(outcome) for outcome in outcomes])
    else:
        table = Table("topic", "partitions", "result", "detail", title=f"topics on {settings.bootstrap}")
        for outcome in outcomes:
            style = {"created": "green", "exists": "", "grown": "green", "mismatch": "red"}[outcome.action]
            table.add_row(outcome.name, str(outcome.partitions), f"[{style}]{outcome.action}[/]", outcome.detail)
        out.print(table)
    if any(outcome.action == "mismatch" for outcome in outcomes):
        raise typer.Exit(EXIT_FAILED)


@app.command("list")
@one_line_errors
def list_topics(as_json: bool = JsonOption) -> None:
    """Show the catalog: each topic's key, partitions, retention, writers and events."""
    settings = Settings.from_env()
    specs = catalog(settings)
    if as_json:
        print_json([dataclasses.asdict(spec) for spec in specs])
        return
    table = Table("topic", "key", "partitions", "cleanup", "retention", "writers", "events")
    for spec in specs:
        retention = "forever" if spec.retention_ms < 0 else f"{spec.retention_ms // 86_400_000} d"
        table.add_row(
            spec.name,
            spec.key,
            str(spec.partitions),
            spec.cleanup,
            retention if spec.cleanup == "delete" else "-",
            ", ".join(spec.writers),
            ", ".join(spec.events),
        )
    out.print(table)
