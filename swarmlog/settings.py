"""One frozen settings object per process, read from SWARMLOG_* environment variables and CLI flags."""

from __future__ import annotations

import dataclasses
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args
from urllib.parse import parse_qs, urlsplit

from swarmlog.errors import ConfigError
from swarmlog.schemas.artifacts import DEFAULT_INLINE_BYTES, EVENT_ROOM_BYTES

BrokerKind = Literal["tansu", "kafka", "docker", "external"]
ImageSource = Literal["local", "official"]
"""Where SWARMLOG_BROKER=docker's images come from: built here (`make images`), or Docker Hub's official ones."""
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
"""How Kafka clients talk to the brokers: Kafka's own `security.protocol` names."""
SaslMechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
ENV_PREFIX = "SWARMLOG_"
SECRET_FIELDS = ("kafka_password", "redis_password")
"""Settings that hold secrets: given as SWARMLOG_<NAME> (a value) or SWARMLOG_<NAME>_FILE (a path), never shown."""


@dataclasses.dataclass(frozen=True)
class Secret:
    """A password or key, shown as `***` wherever settings are printed; `source` says where it was read from."""

    value: str = dataclasses.field(repr=False)
    source: str = "a flag"
    path: Path | None = None
    """The file it was read from, if any: what an export line or a child process is given instead of the value."""

    def __str__(self) -> str:
        return "***"

    @classmethod
    def from_file(cls, path: Path, variable: str) -> Secret:
        """The first line of a secret file, or a ConfigError naming the variable and the file."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{variable}={path} cannot be read: {exc.strerror or exc}") from None
        return cls(text.splitlines()[0] if text else "", source=str(path), path=path)


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
    inline_output_bytes: int = DEFAULT_INLINE_BYTES
    """The largest text (UTF-8 bytes) an event carries itself; a larger one travels as an artifact's reference."""
    artifacts_dir: Path | None = None
    """The artifact store's blob directory, shared by every process of a swarm; None: `artifacts/` in cache_dir."""
    metrics_port: int = 0
    memory_flush_ms: int = 500
    memory_ttl_s: int = 3600
    images: ImageSource = "local"
    kafka_security_protocol: SecurityProtocol = "PLAINTEXT"
    kafka_sasl_mechanism: SaslMechanism = "SCRAM-SHA-512"
    kafka_username: str | None = None
    kafka_password: Secret | None = None
    kafka_ca_file: Path | None = None
    """CA bundle the brokers' certificates are checked against (else the system's)."""
    kafka_cert_file: Path | None = None
    """Client certificate (PEM) for mutual TLS; with kafka_key_file."""
    kafka_key_file: Path | None = None
    kafka_check_hostname: bool = True
    redis_username: str | None = None
    redis_password: Secret | None = None
    redis_ca_file: Path | None = None
    redis_cert_file: Path | None = None
    redis_key_file: Path | None = None
    signing_key_file: Path | None = None
    """This process's Ed25519 private key (PEM): it signs every event it writes (docs/operations.md, "Signing")."""
    signing_principal: str | None = None
    """The name the key signs as: its entry in the trust file."""
    signing_trust_file: Path | None = None
    """Each principal's public key and claims (TOML); when set, readers dead-letter what is not signed by its writer."""

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
        self._check_security()
        if (self.signing_key_file is None) != (self.signing_principal is None):
            raise ConfigError("signing needs both SWARMLOG_SIGNING_KEY_FILE and SWARMLOG_SIGNING_PRINCIPAL")
        for path in (self.signing_key_file, self.signing_trust_file):
            if path is not None and not path.is_file():
                raise ConfigError(f"{path} (a SWARMLOG_SIGNING_* file) is not a readable file")
        if self.redis_url is not None:
            _check_redis_url(self.redis_url, tls=self.redis_ca_file is not None or self.redis_cert_file is not None)
        if self.redis_url is not None and not self.redis_url.startswith(("redis://", "rediss://", "unix://")):
            raise ConfigError(f"SWARMLOG_REDIS_URL={self.redis_url!r} must start with redis://, rediss:// or unix://")
        for name in (
            "inbox_partitions",
            "regions",
            "default_partitions",
            "replication_factor",
            "max_message_bytes",
            "inline_output_bytes",
            "memory_flush_ms",
            "memory_ttl_s",
        ):
            if getattr(self, name) < 1:
                raise ConfigError(f"SWARMLOG_{name.upper()} must be at least 1, got {getattr(self, name)}")
        if self.inline_output_bytes + EVENT_ROOM_BYTES > self.max_message_bytes:
            raise ConfigError(
                f"SWARMLOG_INLINE_OUTPUT_BYTES={self.inline_output_bytes} leaves less than {EVENT_ROOM_BYTES} bytes of "
                f"SWARMLOG_MAX_MESSAGE_BYTES={self.max_message_bytes} for the rest of an event; lower it"
            )
        if not 0 <= self.metrics_port <= 65535:
            raise ConfigError(f"SWARMLOG_METRICS_PORT must be a TCP port (0-65535), got {self.metrics_port}")

    def _check_security(self) -> None:
        """A ConfigError for a security setting that names nothing the protocol uses, or misses what it needs."""
        if self.kafka_security_protocol not in get_args(SecurityProtocol):
            raise ConfigError(
                f"SWARMLOG_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol!r} is not one of "
                f"{', '.join(get_args(SecurityProtocol))}"
            )
        if self.kafka_sasl_mechanism not in get_args(SaslMechanism):
            raise ConfigError(
                f"SWARMLOG_KAFKA_SASL_MECHANISM={self.kafka_sasl_mechanism!r} is not one of "
                f"{', '.join(get_args(SaslMechanism))}"
            )
        if self.kafka_security_protocol.startswith("SASL_") and (
            not self.kafka_username or self.kafka_password is None
        ):
            raise ConfigError(
                f"SWARMLOG_KAFKA_SECURITY_PROTOCOL={self.kafka_security_protocol} needs SWARMLOG_KAFKA_USERNAME and "
                "SWARMLOG_KAFKA_PASSWORD_FILE (or SWARMLOG_KAFKA_PASSWORD)"
            )
        if (self.kafka_cert_file is None) != (self.kafka_key_file is None):
            raise ConfigError("mutual TLS needs both SWARMLOG_KAFKA_CERT_FILE and SWARMLOG_KAFKA_KEY_FILE")
        if self.kafka_cert_file is not None and not self.kafka_tls:
            raise ConfigError(
                "SWARMLOG_KAFKA_CERT_FILE is set but SWARMLOG_KAFKA_SECURITY_PROTOCOL is "
                f"{self.kafka_security_protocol}; use SSL (mutual TLS) or SASL_SSL"
            )
        if (self.redis_cert_file is None) != (self.redis_key_file is None):
            raise ConfigError(
                "Redis client certificates need both SWARMLOG_REDIS_CERT_FILE and SWARMLOG_REDIS_KEY_FILE"
            )
        for name in ("kafka_ca_file", "kafka_cert_file", "kafka_key_file", "redis_ca_file", "redis_cert_file",
                     "redis_key_file"):  # fmt: skip
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ConfigError(f"SWARMLOG_{name.upper()}={path} is not a readable file")

    @property
    def kafka_tls(self) -> bool:
        """Whether Kafka connections are encrypted (SSL or SASL_SSL)."""
        return self.kafka_security_protocol in ("SSL", "SASL_SSL")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **flags: Any) -> Settings:
        """Settings from SWARMLOG_* variables, overridden by the flags that are not None; a secret comes from
        SWARMLOG_<NAME>_FILE (a path) or SWARMLOG_<NAME> (a value), the file first."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            variable = ENV_PREFIX + field.name.upper()
            if field.name in SECRET_FIELDS:
                secret = _secret(env, variable)
                if secret is not None:
                    values[field.name] = secret
                continue
            raw = env.get(variable)
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


def _check_redis_url(url: str, *, tls: bool) -> None:
    """A ConfigError for a Redis URL that carries a user or a password (not shown), or is plain while TLS files are
    set: the password lives in a file, so a URL is safe to print."""
    parts = urlsplit(url)
    if "@" in parts.netloc or {"username", "password"} & set(parse_qs(parts.query)):
        raise ConfigError(
            "SWARMLOG_REDIS_URL must not carry a user or a password (the URL is not shown here, to keep it secret): "
            "give the user as SWARMLOG_REDIS_USERNAME and the password in the file SWARMLOG_REDIS_PASSWORD_FILE"
        )
    if tls and not url.startswith("rediss://"):
        raise ConfigError(
            f"SWARMLOG_REDIS_CA_FILE or SWARMLOG_REDIS_CERT_FILE is set but SWARMLOG_REDIS_URL={url} is not TLS; "
            "use a rediss:// URL"
        )


def _secret(env: Mapping[str, str], variable: str) -> Secret | None:
    """The secret `variable` names: read from the file of <variable>_FILE, else the value of <variable>, else None."""
    path = env.get(variable + "_FILE")
    if path:
        return Secret.from_file(Path(path), variable + "_FILE")
    value = env.get(variable)
    return Secret(value, source=variable) if value else None


def _convert(name: str, annotation: Any, raw: str) -> Any:
    """A typed value from an environment string, or a ConfigError naming the variable."""
    kind = str(annotation)
    if kind == "bool":
        if raw.lower() not in BOOLEANS:
            raise ConfigError(f"SWARMLOG_{name.upper()}={raw!r} is not true or false")
        return BOOLEANS[raw.lower()]
    try:
        if kind == "int":
            return int(raw)
        if kind in ("Path", "Path | None"):
            return Path(raw)
    except ValueError:
        raise ConfigError(f"SWARMLOG_{name.upper()}={raw!r} is not a whole number") from None
    return raw


BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


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
