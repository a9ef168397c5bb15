"""The `swarmlog` command line: one typer app, one module per verb group under swarmlog.commands."""

from __future__ import annotations

import typer

from swarmlog.commands import acl, coordinator, docker, keys, replay, schemas, topics
from swarmlog.commands.agent import agent, fleet
from swarmlog.commands.agents import agents
from swarmlog.commands.console import console
from swarmlog.commands.demo import demo
from swarmlog.commands.status import status
from swarmlog.commands.streams import streams
from swarmlog.commands.submit import submit
from swarmlog.commands.top import top
from swarmlog.commands.up import up
from swarmlog.commands.watch import watch

app = typer.Typer(
    no_args_is_help=True,
    help="swarmlog: an event-sourced actor system on Kafka that runs LLM agents. "
    "Exit codes: 0 ok, 1 the operation failed, 2 usage, 3 configuration, 4 a service is unreachable.",
)
app.command("demo")(demo)
app.command("up")(up)
app.command("agent")(agent)
app.command("fleet")(fleet)
app.command("streams")(streams)
app.add_typer(coordinator.app, name="coordinator")
app.command("submit")(submit)
app.command("top")(top)
app.command("watch")(watch)
app.command("status")(status)
app.command("agents")(agents)
app.command("console")(console)
app.add_typer(topics.app, name="topics")
app.add_typer(acl.app, name="acl")
app.add_typer(schemas.app, name="schemas")
app.add_typer(replay.app, name="replay")
app.add_typer(docker.app, name="docker")
app.add_typer(keys.app, name="keys")
