"""How every Redis client of swarmlog connects: the URL, the ACL user and its password, TLS, from the settings alone.

The agents' memory bus, the streams worker's memory projection, `swarmlog replay memory` and the readiness probes
build their clients with `RedisAccess`; nothing else calls `from_url`, so a secured Redis reaches every process.
The password never travels in the URL (Settings refuses one there), so a URL is safe to show. A failure to connect
becomes a ServiceError that says which it was: the user or password refused, a command the user may not run, the
server's certificate not trusted, this client's certificate refused (AccessDenied: a retry will not help), or no
server answering.
"""

from __future__ import annotations

import dataclasses
import socket
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import redis
import redis.asyncio as aioredis
from redis.exceptions import AuthenticationError, NoPermissionError, RedisError

from swarmlog.errors import AccessDenied, ServiceError
from swarmlog.settings import Secret, Settings

TIMEOUT_S = 5.0
HELP = 'docs/operations.md, "Redis: users and TLS"'
UNTRUSTED_SERVER = ("CERTIFICATE_VERIFY_FAILED",)
REFUSED_CLIENT = (
    "CERTIFICATE_REQUIRED",
    "BAD_CERTIFICATE",
    "UNKNOWN_CA",
    "CERTIFICATE_UNKNOWN",
    "EOF occurred in violation of protocol",
)
"""What a server that refused this client's certificate (or its lack of one) leaves: OpenSSL's alerts, or a TLS
connection ended before the first reply."""
ALERT_WAIT_S = 1.0
"""How long the TLS probe listens for a refusing server's alert (a server that accepts says nothing first)."""


@dataclasses.dataclass(frozen=True)
class RedisAccess:
    """Where a Redis server is and how to get in: its URL, the ACL user and password, the TLS files (rediss://)."""

    url: str
    username: str | None = None
    password: Secret | None = None
    ca_file: Path | None = None
    """The CA bundle the server's certificate is checked against (else the system's)."""
    cert_file: Path | None = None
    """This client's certificate, for a server that asks for one (tls-auth-clients); with key_file."""
    key_file: Path | None = None

    @classmethod
    def of(cls, settings: Settings) -> RedisAccess | None:
        """The access the settings describe; None when no Redis is configured."""
        if settings.redis_url is None:
            return None
        return cls(
            settings.redis_url,
            settings.redis_username,
            settings.redis_password,
            settings.redis_ca_file,
            settings.redis_cert_file,
            settings.redis_key_file,
        )

    @property
    def tls(self) -> bool:
        """Whether connections are encrypted (a rediss:// URL)."""
        return self.url.startswith("rediss://")

    @property
    def user(self) -> str:
        """The ACL user connections log in as (Redis's `default` when none is named)."""
        return self.username or "default"

    def options(self) -> dict[str, Any]:
        """Keyword arguments of redis-py's from_url, blocking or asyncio: the user, the password, and for rediss://
        the CA, the client certificate and a hostname check."""
        options: dict[str, Any] = {
            "username": self.username,
            "password": None if self.password is None else self.password.value,
            "socket_connect_timeout": TIMEOUT_S,
        }
        if self.tls:
            options.update(
                ssl_cert_reqs="required",
                ssl_check_hostname=True,
                ssl_ca_certs=_text(self.ca_file),
                ssl_certfile=_text(self.cert_file),
                ssl_keyfile=_text(self.key_file),
            )
        return options

    def client(self) -> aioredis.Redis:
        """An asyncio client (connections open on first use)."""
        return aioredis.Redis.from_url(self.url, **self.options())

    def check(self) -> None:
        """PING the server as this user, once: a ServiceError (AccessDenied when refused) that says what to fix."""
        client = redis.Redis.from_url(self.url, socket_timeout=TIMEOUT_S, **self.options())
        try:
            client.ping()
        except RedisError as exc:
            raise self.failure(exc) from exc
        finally:
            client.close()

    def failure(self, exc: RedisError) -> ServiceError:
        """The error a failed call becomes: what Redis or TLS refused, and which setting to check."""
        reason = str(exc).rstrip(".")
        if isinstance(exc, AuthenticationError):
            return AccessDenied(
                f"Redis at {self.url} refused user {self.user!r}: {reason}. Check SWARMLOG_REDIS_USERNAME and "
                f"the password ({self._password_source()}) against the server's ACL users ({HELP})"
            )
        if isinstance(exc, NoPermissionError):
            return AccessDenied(
                f"Redis at {self.url} lets user {self.user!r} in but not run what swarmlog needs: {reason}. "
                f"Grant the user the memory bus's ACL rules ({HELP})"
            )
        if any(mark in reason for mark in UNTRUSTED_SERVER):
            trusted = self.ca_file or "unset: the system's CAs"
            return AccessDenied(
                f"the TLS certificate of Redis at {self.url} is not trusted: {reason}. SWARMLOG_REDIS_CA_FILE "
                f"({trusted}) must hold the CA that signed it, and the certificate must name the URL's host and be "
                "in date"
            )
        if not any(mark in reason for mark in REFUSED_CLIENT) and self.tls:
            reason = self._tls_alert() or reason  # TLS 1.3: the first command's reset can overtake the server's alert
        if any(mark in reason for mark in REFUSED_CLIENT):
            client = f"its certificate {self.cert_file}" if self.cert_file else "no client certificate"
            return AccessDenied(
                f"Redis at {self.url} ended this client's TLS connection, which presented {client}: {reason}. A server "
                "that checks client certificates (tls-auth-clients) needs SWARMLOG_REDIS_CERT_FILE and "
                "SWARMLOG_REDIS_KEY_FILE set to one signed by a CA it trusts (its tls-ca-cert-file)"
            )
        return ServiceError(
            f"no Redis answers at {self.url} ({reason}); start one with `swarmlog up`, or point SWARMLOG_REDIS_URL "
            "at a running one"
        )

    def _tls_alert(self) -> str | None:
        """The alert with which the server ends a TLS connection made as this client, read before anything is written
        (writing first lets the server's reset overtake its alert); None when it keeps the connection open."""
        address = urlsplit(self.url)
        host = address.hostname or "localhost"
        context = ssl.create_default_context(cafile=_text(self.ca_file))
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(str(self.cert_file), str(self.key_file))
        try:
            with (
                socket.create_connection((host, address.port or 6379), timeout=TIMEOUT_S) as raw,
                context.wrap_socket(raw, server_hostname=host) as tls,
            ):
                tls.settimeout(ALERT_WAIT_S)
                tls.recv(1)
        except ssl.SSLError as exc:
            return str(exc)
        except OSError:
            return None
        return None

    def _password_source(self) -> str:
        """Where the password was read from, for an error message (never the password)."""
        if self.password is None:
            return "none set: SWARMLOG_REDIS_PASSWORD_FILE"
        return f"from {self.password.source}"


def _text(path: Path | None) -> str | None:
    """A path as redis-py takes it."""
    return None if path is None else str(path)
