"""`swarmlog agent` (one agent, one per GPU) and `swarmlog fleet` (many agents in one process), until SIGTERM."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from swarmlog import logs
from swarmlog.actors.brains import BRAINS, max_tokens_for
from swarmlog.actors.shell.agent import run_agent, run_agents
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.commands.common import one_line_errors
from swarmlog.errors import ConfigError
from swarmlog.settings import Settings

Capabilities = Annotated[str, typer.Option(help="Comma-separated capabilities, e.g. coding,review.")]
BrainName = Annotated[str, typer.Option(envvar="SWARMLOG_BRAIN", help=f"The model adapter: {', '.join(BRAINS)}.")]
Model = Annotated[
    str | None, typer.Option(envvar="SWARMLOG_MODEL", help="GGUF path, model id, or scripted-brain JSON file.")
]
Node = Annotated[str | None, typer.Option(help="Node name (default: this host's name).")]
Region = Annotated[str, typer.Option(help="The coordinator region the agents belong to.")]
DataDir = Annotated[Path | None, typer.Option(help="Where the agents' store lives (default: cache dir/agents).")]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        envvar="SWARMLOG_MAX_TOKENS",
        help="Tokens a generation may take (default: 2048 on vllm and openai, 428 elsewhere); contents get what "
        "an action leaves of them.",
    ),
]
HeartbeatS = Annotated[float, typer.Option(help="Seconds between heartbeats.")]
Concurrency = Annotated[
    int,
    typer.Option(
        envvar="SWARMLOG_CONCURRENCY",
        min=1,
        help="Tasks an agent runs at once (its capacity: the coordinator routes up to this many to it; the vllm "
        "brain batches their generations).",
    ),
]
AskPeers = Annotated[
    bool,
    typer.Option(
        help="Offer the model the ask action: a question to another agent of the "
        "region, which costs that agent a generation."
    ),
]
AskTimeoutS = Annotated[float, typer.Option(help="How long a task waits for a peer's answer.")]
GroundTruthDocument = Annotated[
    str, typer.Option(help="The ground-truth document (on swarm.groundtruth) to work from.")
]
ResyncS = Annotated[
    float,
    typer.Option(
        help="Seconds between re-syncs of the ground truth (a ResyncRequested on swarm.control re-syncs at once)."
    ),
]
Bootstrap = Annotated[str | None, typer.Option(help="Kafka bootstrap servers (default: $SWARMLOG_BOOTSTRAP).")]
MetricsPort = Annotated[
    int | None, typer.Option(help="Serve Prometheus /metrics on this port; 0 = off ($SWARMLOG_METRICS_PORT).")
]


@one_line_errors
def agent(
    agent_id: Annotated[str, typer.Argument(metavar="ID", help="This agent's id, unique in the swarm.")],
    capabilities: Capabilities = "",
    brain: BrainName = "llamacpp",
    model: Model = None,
    max_tokens: MaxTokens = None,
    gpu: Annotated[int | None, typer.Option(help="The GPU index this agent owns (none: CPU).")] = None,
    node: Node = None,
    region: Region = "region-0",
    slot: Annotated[
        int | None,
        typer.Option(
            help="Inbox partition, shared with any agent given the same (default: allocated by the region's coordinator)."
        ),
    ] = None,
    data_dir: DataDir = None,
    heartbeat_s: HeartbeatS = 1.0,
    concurrency: Concurrency = 1,
    ask_peers: AskPeers = False,
    ask_timeout_s: AskTimeoutS = 60.0,
    ground_truth: GroundTruthDocument = "main",
    resync_s: ResyncS = 60.0,
    bootstrap: Bootstrap = None,
    metrics_port: MetricsPort = None,
) -> None:
    """Register, heartbeat and work on the tasks in this agent's inbox partition until SIGTERM."""
    settings = _settings(bootstrap, metrics_port)
    shared = _Shared.of(locals())
    config = shared.config(settings, agent_id, gpu, slot)
    logs.configure()
    asyncio.run(run_agent(config, settings))


@one_line_errors
def fleet(
    agents: Annotated[int | None, typer.Option(help="How many agents (default: one per --gpus entry, else 8).")] = None,
    name: Annotated[
        str | None, typer.Option(help="This host's name; agents are <name>-0, <name>-1, ... (default: host name).")
    ] = None,
    gpus: Annotated[
        str | None, typer.Option(help="Comma-separated GPU indexes, one agent per GPU (none: CPU agents).")
    ] = None,
    first_slot: Annotated[
        int | None,
        typer.Option(
            help="Agent i reads inbox partition first_slot + i (default: allocated by the region's coordinator)."
        ),
    ] = None,
    capabilities: Capabilities = "",
    brain: BrainName = "llamacpp",
    model: Model = None,
    max_tokens: MaxTokens = None,
    node: Node = None,
    region: Region = "region-0",
    data_dir: DataDir = None,
    heartbeat_s: HeartbeatS = 1.0,
    concurrency: Concurrency = 1,
    ask_peers: AskPeers = False,
    ask_timeout_s: AskTimeoutS = 60.0,
    ground_truth: GroundTruthDocument = "main",
    resync_s: ResyncS = 60.0,
    bootstrap: Bootstrap = None,
    metrics_port: MetricsPort = None,
) -> None:
    """Run many agents in this one process (a node's GPUs, or a rig of scripted agents), sharing its Kafka clients
    and one store, until SIGTERM; each agent keeps its own id, slot, checkpoint, heartbeats and recovery."""
    settings = _settings(bootstrap, metrics_port)
    devices: list[int | None] = [int(g) for g in _listed(gpus or "")] or [None]
    count = agents if agents is not None else (len(devices) if gpus else 8)
    if count < 1 or (gpus and count != len(devices)):
        raise ConfigError(f"--agents {count} with --gpus {gpus!r}: give one agent per GPU, and at least one agent")
    host = name or socket.gethostname()
    shared = _Shared.of(locals())
    configs = [
        shared.config(
            settings,
            f"{host}-{n}",
            devices[n] if gpus else None,
            None if first_slot is None else first_slot + n,
        )
        for n in range(count)
    ]
    logs.configure()
    asyncio.run(run_agents(configs, settings, f"fleet:{host}", configs[0].data_dir / f"fleet-{host}"))


@dataclasses.dataclass(frozen=True)
class _Shared:
    """The options `agent` and `fleet` share, as given on the command line."""

    capabilities: str
    brain: str
    model: str | None
    max_tokens: int | None
    node: str | None
    region: str
    data_dir: Path | None
    heartbeat_s: float
    concurrency: int
    ask_peers: bool
    ask_timeout_s: float
    ground_truth: str
    resync_s: float

    @classmethod
    def of(cls, options: Mapping[str, Any]) -> _Shared:
        """These options from a command's arguments (its `locals()`)."""
        return cls(**{field.name: options[field.name] for field in dataclasses.fields(cls)})

    def config(self, settings: Settings, agent_id: str, gpu: int | None, slot: int | None) -> AgentConfig:
        """One agent's configuration from these options; a ConfigError for a slot outside the inbox partitions."""
        return AgentConfig(
            agent_id=agent_id,
            capabilities=_listed(self.capabilities),
            brain=self.brain,
            model=self.model,
            max_tokens=max_tokens_for(self.brain, self.max_tokens),
            gpu=gpu,
            node=self.node or socket.gethostname(),
            region=self.region,
            slot=_slot(settings, agent_id, slot),
            data_dir=self.data_dir or settings.cache_dir / "agents",
            heartbeat_s=self.heartbeat_s,
            concurrency=self.concurrency,
            ask_peers=self.ask_peers,
            ask_timeout_s=self.ask_timeout_s,
            ground_truth=self.ground_truth,
            resync_s=self.resync_s,
        )


def _settings(bootstrap: str | None, metrics_port: int | None) -> Settings:
    """The process's settings; a ConfigError without a broker."""
    settings = Settings.from_env(bootstrap=bootstrap, metrics_port=metrics_port)
    if not settings.bootstrap:
        raise ConfigError("swarmlog agents need a broker: pass --bootstrap or set SWARMLOG_BOOTSTRAP")
    return settings


def _slot(settings: Settings, agent_id: str, slot: int | None) -> int | None:
    """The agent's inbox partition as given (None: allocated); a ConfigError outside the inbox partitions."""
    if slot is not None and not 0 <= slot < settings.inbox_partitions:
        raise ConfigError(
            f"slot {slot} of agent {agent_id} is not an inbox partition (0..{settings.inbox_partitions - 1})"
        )
    return slot


def _listed(text: str) -> tuple[str, ...]:
    """The non-empty items of a comma-separated list."""
    return tuple(item.strip() for item in text.split(",") if item.strip())
