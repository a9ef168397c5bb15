"""What the stream-processor worker is configured with: the process Settings and its own knobs, per broker kind."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from swarmlog.errors import ConfigError
from swarmlog.settings import Settings
from swarmlog.streams.budgets import DEFAULT_WINDOW_MS
from swarmlog.streams.registry import DEFAULT_TIMEOUT_MS

ENV_PREFIX = "SWARMLOG_STREAMS_"
Guarantee = Literal["at_least_once", "exactly_once"]

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
    budget_window_ms: int = DEFAULT_WINDOW_MS
    tick_s: float = 0.5
    guarantee: Guarantee = "at_least_once"

    def __post_init__(self) -> None:
        if not self.settings.bootstrap:
            raise ConfigError("the streams worker needs a broker: set SWARMLOG_BOOTSTRAP or start one with `swarmlog up`")
        for name in ("liveness_timeout_ms", "budget_tokens", "budget_window_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{ENV_PREFIX}{name.upper()} must be at least 1, got {getattr(self, name)}")
        if self.guarantee == "exactly_once" and self.settings.broker == "tansu":
            raise ConfigError("Tansu has no transactions: unset SWARMLOG_STREAMS_GUARANTEE or use --broker kafka")

    @classmethod
    def from_env(cls, settings: Settings, env: Mapping[str, str] | None = None, **flags: Any) -> StreamsConfig:
        """The configuration from SWARMLOG_STREAMS_* variables, overridden by the flags that are not None."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + field.name.upper())
            if field.name != "settings" and raw:
                values[field.name] = _convert(field.name, field.default, raw)
        values.update({name: value for name, value in flags.items() if value is not None})
        return cls(settings=settings, **values)

    def faust_settings(self) -> dict[str, Any]:
        """Faust App keyword arguments for this broker kind (Tansu needs short sessions and one-record batches)."""
        settings = self.settings
        assert settings.bootstrap is not None  # __post_init__ refuses a config without one
        common = {
            "broker": [f"kafka://{server.strip()}" for server in settings.bootstrap.split(",")],
            "store": "rocksdb://",
            "datadir": str(self.data_dir),
            "topic_partitions": settings.default_partitions,
            "topic_replication_factor": settings.replication_factor,
            "processing_guarantee": self.guarantee,
            "key_serializer": "raw",
            "value_serializer": "raw",
            "web_enabled": False,
            "autodiscover": False,
        }
        return {**common, **TANSU_FAUST} if settings.broker == "tansu" else common


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
