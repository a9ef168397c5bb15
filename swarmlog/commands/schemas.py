"""`swarmlog schemas`: the event contract's compatibility check."""

from __future__ import annotations

import typer

from swarmlog.commands.common import EXIT_FAILED, err, one_line_errors, out
from swarmlog.schemas.compat import check_schemas

app = typer.Typer(no_args_is_help=True, help="The Avro event contract in schemas/.")


@app.command("check")
@one_line_errors
def check(
    update_lock: bool = typer.Option(False, "--update-lock", help="Record new schema versions in fingerprints.lock."),
) -> None:
    """Check every schema version is backward and forward compatible with the one before, and none was edited."""
    problems = check_schemas(update_lock=update_lock)
    for problem in problems:
        err.print(f"[red]incompatible:[/red] {problem}", highlight=False, soft_wrap=True)
    if problems:
        raise typer.Exit(EXIT_FAILED)
    out.print("schemas: every version compatible with the one before; fingerprints.lock matches")
