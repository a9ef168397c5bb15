"""`swarmlog agent`: run one agent (one per GPU) until SIGTERM, which drains it."""

from __future__ import annotations

import asyncio
import socket
import zlib
from pathlib import Path
from typing import Annotated

import typer

from swarmlog import logs
from swarmlog.actors.brains import BRAINS
from swarmlog.actors.shell.agent import AgentConfig, run_agent
from swarmlog.commands.common import one_line_errors
from swarmlog.errors import ConfigError
from swarmlog.settings import Settings


@one_line_errors
def agent(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="This agent's id, unique in the swarm.")],
    capabilities: Annotated[str, typer.Option(help="Comma-separated capabilities, e.g. coding,review.")] = "",
    brain: Annotated[
        str, typer.Option(envvar="SWARMLOG_BRAIN", help=f"The model adapter: {', '.join(BRAINS)}.")
    ] = "llamacpp",
    model: Annotated[
        str | None, typer.Option(envvar="SWARMLOG_MODEL", help="GGUF path, model id, or scripted-brain JSON file.")
    ] = None,
    gpu: Annotated[int | None, typer.Option(help="The GPU index this agent owns (none: CPU).")] = None,
    node: Annotated[str | None, typer.Option(help="Node name (default: this host's name).")] = None,
    region: Annotated[str, typer.Option(help="The coordinator region this agent belongs to.")] = "region-0",
    slot: Annotated[int | None, typer.Option(help="Inbox partition (default: crc32(ID) % inbox partitions).")] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the agent's store lives (default: cache dir/agents).")
    ] = None,
    heartbeat_s: Annotated[float, typer.Option(help="Seconds between heartbeats.")] = 1.0,
    ask_peers: Annotated[
        bool,
        typer.Option(
            help="Offer the model the ask action: a question to another agent of the "
            "region, which costs that agent a generation."
        ),
    ] = False,
    ask_timeout_s: Annotated[float, typer.Option(help="How long a task waits for a peer's answer.")] = 60.0,
    ground_truth: Annotated[
        str, typer.Option(help="The ground-truth document (on swarm.groundtruth) to work from.")
    ] = "main",
    resync_s: Annotated[
        float,
        typer.Option(
            help="Seconds between re-syncs of the ground truth (a ResyncRequested on swarm.control re-syncs at once)."
        ),
    ] = 60.0,
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers (default: $SWARMLOG_BOOTSTRAP).")
    ] = None,
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus /metrics on this port; 0 = off ($SWARMLOG_METRICS_PORT).")
    ] = None,
) -> None:
    """Register, heartbeat and work on the tasks in this agent's inbox partition until SIGTERM."""
    settings = Settings.from_env(bootstrap=bootstrap, metrics_port=metrics_port)
    if not settings.bootstrap:
        raise ConfigError("swarmlog agent needs a broker: pass --bootstrap or set SWARMLOG_BOOTSTRAP")
    slot = zlib.crc32(agent_id.encode()) % settings.inbox_partitions if slot is None else slot
    if not 0 <= slot < settings.inbox_partitions:
        raise ConfigError(f"--slot {slot} is not an inbox partition (0..{settings.inbox_partitions - 1})")
    config = AgentConfig(
        agent_id=agent_id,
        capabilities=tuple(c.strip() for c in capabilities.split(",") if c.strip()),
        brain=brain,
        model=model,
        gpu=gpu,
        node=node or socket.gethostname(),
        region=region,
        slot=slot,
        data_dir=data_dir or settings.cache_dir / "agents",
        heartbeat_s=heartbeat_s,
        ask_peers=ask_peers,
        ask_timeout_s=ask_timeout_s,
        ground_truth=ground_truth,
        resync_s=resync_s,
    )
    logs.configure()
    asyncio.run(run_agent(config, settings))
