"""The `swarmlog` command line: one typer app, one module per verb group under swarmlog.commands."""

from __future__ import annotations

import typer

from swarmlog.commands import schemas, topics
from swarmlog.commands.agent import agent
from swarmlog.commands.coordinator import coordinator
from swarmlog.commands.demo import demo
from swarmlog.commands.streams import streams
from swarmlog.commands.up import up

app = typer.Typer(
    no_args_is_help=True,
    help="swarmlog: an event-sourced actor system on Kafka that runs LLM agents. "
    "Exit codes: 0 ok, 1 the operation failed, 2 usage, 3 configuration, 4 a service is unreachable.",
)
app.command("demo")(demo)
app.command("up")(up)
app.command("agent")(agent)
app.command("streams")(streams)
app.command("coordinator")(coordinator)
app.add_typer(topics.app, name="topics")
app.add_typer(schemas.app, name="schemas")


def main() -> None:
    """Entry point of the `swarmlog` console script."""
    app()


if __name__ == "__main__":
    main()
