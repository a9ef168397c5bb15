"""`swarmlog acl`: least privilege per role: show the roles table, or apply its ACLs to a Kafka cluster as the admin."""

from __future__ import annotations

import asyncio
import dataclasses

import typer
from rich.table import Table

from swarmlog.acl import Grant, Role, bindings, grants, parse_principals, roles_table
from swarmlog.commands.common import one_line_errors, out, print_json
from swarmlog.errors import ConfigError
from swarmlog.kafka.acls import apply_acls
from swarmlog.settings import Settings
from swarmlog.streams.app.config import worker_setting

app = typer.Typer(
    no_args_is_help=True,
    help="Kafka ACLs per role (coordinator, top, agent, streams, producer, operator): show them, or apply them.",
)

PrincipalOption = typer.Option(
    [],
    "--principal",
    help="role=principal, repeatable: who fills a role, e.g. --principal agent=User:agent-0 --principal "
    "agent=User:agent-1 (a bare name is a User).",
)
StreamsAppIdOption = typer.Option(
    None, "--streams-app-id", help="The streams workers' app id (default: $SWARMLOG_STREAMS_APP_ID, swarmlog-streams)."
)
AskPeersOption = typer.Option(
    False,
    "--ask-peers",
    help="Let agents write peers' inboxes (agents run with --ask-peers); else coordinators alone do.",
)
JsonOption = typer.Option(False, "--json", help="Print JSON instead of a table.")


def _grants(settings: Settings, streams_app_id: str | None, ask_peers: bool) -> list[Grant]:
    """The roles' grants for these settings and the streams workers' app id."""
    return grants(settings, streams_app_id=streams_app_id or worker_setting("app_id"), ask_peers=ask_peers)


@app.command("show")
@one_line_errors
def show(
    principal: list[str] = PrincipalOption,
    streams_app_id: str | None = StreamsAppIdOption,
    ask_peers: bool = AskPeersOption,
    as_json: bool = JsonOption,
) -> None:
    """The roles table: what each role may read and write (a `*` ends a prefix of names); no broker needed. `--json`
    prints every grant (role, resource type, name, pattern, operation), for tools that make ACLs of their own."""
    granted = _grants(Settings.from_env(), streams_app_id, ask_peers)
    if as_json:
        print_json([dataclasses.asdict(grant) for grant in granted])
        return
    rows = roles_table(granted, parse_principals(principal))
    table = Table("role", "principals", "writes", "reads", "other topics", "groups", "transactional ids")
    for row in rows:
        table.add_row(
            row.role,
            *(", ".join(cell) or "-" for cell in dataclasses.astuple(row)[1:]),
        )
    out.print(table)


@app.command("apply")
@one_line_errors
def apply(
    principal: list[str] = PrincipalOption,
    bootstrap: str | None = typer.Option(None, "--bootstrap", help="Kafka bootstrap servers ($SWARMLOG_BOOTSTRAP)."),
    streams_app_id: str | None = StreamsAppIdOption,
    ask_peers: bool = AskPeersOption,
    prune: bool = typer.Option(
        False, "--prune", help="Also delete the other ALLOW ACLs of the principals named (never anyone else's)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print what would change; change nothing."),
    as_json: bool = JsonOption,
) -> None:
    """Give each principal its role's ACLs (Kafka only; run as the admin, a super user); safe to run again."""
    settings = Settings.from_env(bootstrap=bootstrap)
    principals = parse_principals(principal)
    if not principals:
        raise ConfigError(
            "name who fills each role: --principal coordinator=User:coordinator --principal agent=User:agent-0 ... "
            f"(roles: {', '.join(Role)})"
        )
    wanted = bindings(_grants(settings, streams_app_id, ask_peers), principals)
    changes = asyncio.run(apply_acls(settings, wanted, prune=prune, dry_run=dry_run))
    if as_json:
        print_json(
            {
                "created": [str(binding) for binding in sorted(changes.create)],
                "deleted": [str(binding) for binding in sorted(changes.delete)],
                "kept": changes.kept,
                "dry_run": dry_run,
            }
        )
        return
    verb = "would " if dry_run else ""
    if changes.create or changes.delete:
        table = Table("change", "principal", "resource", "operation", title=f"ACLs on {settings.bootstrap}")
        for action, changed in ((f"{verb}create", changes.create), (f"{verb}delete", changes.delete)):
            for binding in sorted(changed):
                table.add_row(action, binding.principal, binding.resource, binding.operation)
        out.print(table)
    out.print(
        f"{verb}create {len(changes.create)}, {verb}delete {len(changes.delete)}, {changes.kept} already in place"
        if changes.create or changes.delete
        else f"nothing to change: all {changes.kept} ACLs are in place"
    )
