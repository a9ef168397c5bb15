"""`swarmlog docker`: start or stop a loopback-only Docker engine, and build swarmlog's images on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swarmlog.commands.common import EXIT_FAILED, one_line_errors, out
from swarmlog.errors import ServiceError
from swarmlog.services import images
from swarmlog.services.engine import engine_answers, start_engine, stop_engine
from swarmlog.settings import Settings

app = typer.Typer(no_args_is_help=True, help="A Docker engine for swarmlog's containers, and the images they run.")


def _state_dir(settings: Settings) -> Path:
    """Where the engine swarmlog starts keeps its pid and log."""
    return settings.cache_dir / "dockerd"


@app.command("start")
@one_line_errors
def start() -> None:
    """Start dockerd (as root; no bridge, no iptables: containers use host networking) unless an engine answers."""
    state = _state_dir(Settings.from_env())
    if start_engine(state):
        out.print(f"started dockerd (log: {state / 'dockerd.log'}); `swarmlog docker stop` stops it")
    else:
        out.print("a Docker engine already answers; nothing started")


@app.command("stop")
@one_line_errors
def stop() -> None:
    """Stop the dockerd that `swarmlog docker start` started; any other engine is left running."""
    if stop_engine(_state_dir(Settings.from_env())):
        out.print("stopped the dockerd swarmlog started")
    else:
        out.print("no dockerd started by swarmlog is running; nothing stopped")


@app.command("status")
def status() -> None:
    """Whether a Docker engine answers."""
    ok, reason = engine_answers()
    out.print(reason)
    if not ok:
        raise typer.Exit(EXIT_FAILED)


@app.command("images")
@one_line_errors
def build_images(
    names: Annotated[
        list[str] | None, typer.Argument(help=f"Images to build (default: all of {', '.join(images.BY_NAME)}).")
    ] = None,
) -> None:
    """Build swarmlog's images from Debian's packages and our jars and wheels (cached by their inputs)."""
    unknown = sorted(set(names or ()) - set(images.BY_NAME))
    if unknown:
        raise ServiceError(f"unknown image {', '.join(unknown)}; the images are {', '.join(images.BY_NAME)}")
    built = images.ensure(names or list(images.BY_NAME), Settings.from_env().cache_dir, out.print)
    for name, reference in built.items():
        out.print(f"{name:<12} {reference}")
