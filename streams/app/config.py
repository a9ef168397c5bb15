"""What the stream-processor worker is configured with: the process Settings and its own knobs, per broker kind."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from swarmlog.errors import ConfigError
from swarmlog.kafka.connection import faust_credentials
from swarmlog.settings import Settings
from swarmlog.streams.budgets import DEFAULT_WINDOW_MS, BudgetPolicy
from swarmlog.streams.registry import DEFAULT_TIMEOUT_MS

ENV_PREFIX = "SWARMLOG_STREAMS_"
Guarantee = Literal["at_least_once", "exactly_once"]

# A worker killed -9 keeps its partitions until its group session times out, and no worker decides deaths or
# throttles meanwhile: Faust's default 60 s session would break the 5 s liveness promise, so sessions are short.
# On Kafka a restarted worker rejoins at once as the same static member (group_instance_id) instead of waiting for
# that: 10.2 s → 2.4 s. Tansu's groups loop forever on JoinGroup once a static member is in them: not used there.
# A linger of 5 ms sends a chunk's changelog writes in a few produce requests, not one or two records at a time.
KAFKA_FAUST = {"broker_session_timeout": 10.0, "broker_heartbeat_interval": 1.0, "producer_linger": 0.005}
# Tansu holds a JoinGroup for about session_timeout/2 and loses changelog updates of multi-record batches.
TANSU_FAUST = {"broker_session_timeout": 6.0, "broker_heartbeat_interval": 0.5, "producer_max_batch_size": 1}


@dataclasses.dataclass(frozen=True)
class StreamsConfig:
    """The worker's configuration: the process Settings plus liveness, budget, tick and storage knobs."""

    settings: Settings
    app_id: str = "swarmlog-streams"
    data_dir: Path = dataclasses.field(default_factory=lambda: Path(tempfile.gettempdir()) / "swarmlog-streams")
    liveness_timeout_ms: int = DEFAULT_TIMEOUT_MS
    budget_tokens: int = 100_000
    budget_overrides: str = ""
    """Per-agent budgets, `agent-a=5000,agent-b=200`: tokens per window for those agents instead of budget_tokens."""
    budget_window_ms: int = DEFAULT_WINDOW_MS
    tick_s: float = 0.5
    guarantee: Guarantee = "at_least_once"
    instance_id: str = ""
    """The worker's static group membership (Kafka's group.instance.id): the same across its restarts and unique
    among running workers; empty: derived from the host name and the data dir, which no two running workers share."""

    def __post_init__(self) -> None:
        if not self.settings.bootstrap:
            raise ConfigError(
                "the streams worker needs a broker: set SWARMLOG_BOOTSTRAP or start one with `swarmlog up`"
            )
        for name in ("liveness_timeout_ms", "budget_tokens", "budget_window_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be at least 1, got {getattr(self, name)}")
        _ = self.budget_policy  # a malformed override fails at start, naming the variable
        if self.guarantee == "exactly_once" and self.settings.broker == "tansu":
            raise ConfigError("Tansu has no transactions: unset SWARMLOG_STREAMS_GUARANTEE or use --broker kafka")

    @classmethod
    def from_env(cls, settings: Settings, env: Mapping[str, str] | None = None, **flags: Any) -> StreamsConfig:
        """The configuration from SWARMLOG_STREAMS_* variables, overridden by the flags that are not None."""
        values = {
            field.name: worker_setting(field.name, env) for field in dataclasses.fields(cls) if field.name != "settings"
        }
        values.update({name: value for name, value in flags.items() if value is not None})
        return cls(settings=settings, **values)

    @property
    def budget_policy(self) -> BudgetPolicy:
        """The default budget and the per-agent overrides, or a ConfigError naming the malformed entry."""
        per_agent: dict[str, int] = {}
        for entry in filter(None, (part.strip() for part in self.budget_overrides.split(","))):
            agent_id, _, tokens = entry.rpartition("=")
            if not agent_id or not tokens.isdigit() or int(tokens) < 1:
                raise ConfigError(f"{ENV_PREFIX}BUDGET_OVERRIDES entry {entry!r} is not agent-id=tokens (tokens >= 1)")
            per_agent[agent_id] = int(tokens)
        return BudgetPolicy(self.budget_tokens, per_agent)

    @property
    def group_instance_id(self) -> str:
        """The static membership id: `instance_id`, else the app id, host name and a digest of the data dir."""
        if self.instance_id:
            return self.instance_id
        where = hashlib.sha256(str(self.data_dir.resolve()).encode()).hexdigest()[:12]
        return f"{self.app_id}-{socket.gethostname()}-{where}"

    def faust_settings(self) -> dict[str, Any]:
        """Faust App keyword arguments: short sessions, static membership on Kafka, one-record batches on Tansu."""
        settings = self.settings
        assert settings.bootstrap is not None  # __post_init__ refuses a config without one
        common = {
            "broker": [f"kafka://{server.strip()}" for server in settings.bootstrap.split(",")],
            "store": "rocksdb://",
            "datadir": str(self.data_dir),
            "topic_partitions": settings.default_partitions,
            "topic_replication_factor": settings.replication_factor,
            "processing_guarantee": self.guarantee,
            # As large as the topics' messages: a dead letter is cut to fit this (swarmlog.kafka.records.fitted).
            "producer_max_request_size": settings.max_message_bytes,
            "key_serializer": "raw",
            "value_serializer": "raw",
            "web_enabled": False,
            "autodiscover": False,
            "broker_credentials": faust_credentials(settings),
        }
        if settings.broker == "tansu":
            return {**common, **TANSU_FAUST}
        return {**common, **KAFKA_FAUST, "consumer_group_instance_id": self.group_instance_id}


def worker_setting(name: str, env: Mapping[str, str] | None = None) -> Any:
    """One worker knob as SWARMLOG_STREAMS_<NAME> sets it, else its default."""
    field = next(field for field in dataclasses.fields(StreamsConfig) if field.name == name)
    raw = (os.environ if env is None else env).get(ENV_PREFIX + name.upper())
    if raw:
        return _convert(name, field.default, raw)
    if field.default is dataclasses.MISSING and callable(field.default_factory):
        return field.default_factory()
    return field.default


def _convert(name: str, default: Any, raw: str) -> Any:
    """A typed value from an environment string, or a ConfigError naming the variable."""
    if name == "data_dir":
        return Path(raw)
    if isinstance(default, str):
        return raw
    try:
        return type(default)(raw)
    except ValueError:
        raise ConfigError(f"{ENV_PREFIX}{name.upper()}={raw!r} is not a number") from None
