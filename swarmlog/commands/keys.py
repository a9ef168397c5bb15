"""`swarmlog keys`: Ed25519 signing keys, one per principal, and their trust file entries."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swarmlog.claims import Role
from swarmlog.commands.common import one_line_errors, out, print_json
from swarmlog.kafka.signing import generate as generate_key

app = typer.Typer(no_args_is_help=True, help="Keys that sign events (docs/operations.md, 'Signing events').")


@app.command("generate")
@one_line_errors
def generate(
    principal: Annotated[str, typer.Option(help="The name the key signs as, e.g. agent-pool-a.")],
    out_dir: Annotated[Path, typer.Option("--out", help="Folder for <principal>.pem (created; never overwritten).")],
    role: Annotated[Role, typer.Option(help="What the principal is; agents and coordinators claim names.")] = "agent",
    claim: Annotated[
        list[str] | None,
        typer.Option(help="An agent id pattern (agents) or a region pattern (coordinators) it may claim; repeat it."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the key's path and the trust entry as JSON.")] = False,
) -> None:
    """Make a principal's private key and print its trust file entry (TOML: append it to SWARMLOG_SIGNING_TRUST_FILE)."""
    path, entry = generate_key(principal, role, claim or [], out_dir)
    if as_json:
        print_json({"principal": principal, "key_file": str(path), "trust_entry": entry})
        return
    note = f"# private key: {path} (SWARMLOG_SIGNING_KEY_FILE, with SWARMLOG_SIGNING_PRINCIPAL={principal})\n"
    out.print(note + entry, highlight=False, markup=False, soft_wrap=True, end="")  # TOML: append it to the trust file
