"""One frozen settings object per process, read from SWARMLOG_* environment variables and CLI flags."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args

from swarmlog.errors import ConfigError

BrokerKind = Literal["tansu", "kafka", "docker", "external"]
ImageSource = Literal["local", "official"]
"""Where SWARMLOG_BROKER=docker's images come from: built here (`make images`), or Docker Hub's official ones."""
ENV_PREFIX = "SWARMLOG_"


def default_cache_dir() -> Path:
    """`.cache/` of the checkout when running from one, else the user's cache folder."""
    checkout = Path(__file__).resolve().parents[1]
    if (checkout / "pyproject.toml").is_file():
        return checkout / ".cache"
    return Path.home() / ".cache" / "swarmlog"


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything a swarmlog process is configured with; built once at start and passed explicitly."""

    broker: BrokerKind = "tansu"
    bootstrap: str | None = None
    redis_url: str | None = None
    schema_registry_url: str | None = None
    cache_dir: Path = dataclasses.field(default_factory=default_cache_dir)
    inbox_partitions: int = 64
    regions: int = 1
    default_partitions: int = 6
    replication_factor: int = 1
    max_message_bytes: int = 1_000_000
    metrics_port: int = 0
    memory_flush_ms: int = 500
    memory_ttl_s: int = 3600
    images: ImageSource = "local"

    def __post_init__(self) -> None:
        if self.broker not in get_args(BrokerKind):
            raise ConfigError(
                f"SWARMLOG_BROKER={self.broker!r} is not a broker kind; use one of {', '.join(get_args(BrokerKind))}"
            )
        if self.images not in get_args(ImageSource):
            raise ConfigError(
                f"SWARMLOG_IMAGES={self.images!r} is not an image source; use one of {', '.join(get_args(ImageSource))}"
            )
        if self.broker == "external" and not self.bootstrap:
            raise ConfigError("SWARMLOG_BROKER=external needs SWARMLOG_BOOTSTRAP=host:port[,host:port...]")
        if self.bootstrap is not None:
            parse_bootstrap(self.bootstrap)
        if self.redis_url is not None and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(f"SWARMLOG_REDIS_URL={self.redis_url!r} must start with redis://, rediss:// or unix://")
        for name in (
            "inbox_partitions",
            "regions",
            "default_partitions",
            "replication_factor",
            "max_message_bytes",
            "memory_flush_ms",
            "memory_ttl_s",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"SWARMLOG_{name.upper()} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"SWARMLOG_METRICS_PORT must be a TCP port (0-65535), got {self.metrics_port}")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
        """Settings from SWARMLOG_* variables, overridden by the flags that are not None."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            raw = env.get(ENV_PREFIX + field.name.upper())
            if raw is not None and raw != "":
                values[field.name] = _convert(field.name, field.type, raw)
        values.update({name: value for name, value in flags.items() if value is not None})
        if "broker" not in values and values.get("bootstrap"):
            values["broker"] = "external"
        return cls(**values)

    @property
    def region_names(self) -> tuple[str, ...]:
        """The regions, named region-0 … region-N-1; region i owns partition i of the coordinator journal."""
        return tuple(f"region-{index}" for index in range(self.regions))

    def with_services(self, *, bootstrap: str, redis_url: str | None = None) -> Settings:
        """A copy pointing at services a fixture just started."""
        return dataclasses.replace(self, bootstrap=bootstrap, redis_url=redis_url or self.redis_url)


def _convert(name: str, annotation: Any, raw: str) -> Any:
    """A typed value from an environment string, or a ConfigError naming the variable."""
    kind = str(annotation)
    try:
        if kind == "int":
            return int(raw)
        if kind == "Path":
            return Path(raw)
    except ValueError:
        raise ConfigError(f"SWARMLOG_{name.upper()}={raw!r} is not a whole number") from None
    return raw


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """host:port pairs of a bootstrap list, or a ConfigError saying what is wrong with it."""
    pairs = []
    for item in bootstrap.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"bootstrap server {item.strip()!r} is not host:port; set SWARMLOG_BOOTSTRAP like localhost:9092"
            )
        pairs.append((host.strip("[]"), int(port)))
    return pairs


def require_reachable(bootstrap: str, timeout_s: float = 3.0) -> None:
    """Raise a ConfigError that says how to fix it unless some bootstrap server accepts a TCP connection."""
    failures = []
    for host, port in parse_bootstrap(bootstrap):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                return
        except OSError as exc:
            failures.append(f"{host}:{port} ({exc.strerror or exc})")
    raise ConfigError(
        f"no Kafka broker answers at {', '.join(failures)}; start one with `swarmlog up`, "
        "or point SWARMLOG_BOOTSTRAP at a running broker"
    )
