"""Who may read the console: its bind address and token settings, checked at start, and the gate every request
passes (token, allowed Host, read-only methods, and headers that keep the page's scripts its own)."""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
import os
import re
from collections.abc import Mapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from swarmlog.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MIN_TOKEN_CHARS = 16
TOKEN_CHARS = re.compile(r"[A-Za-z0-9._~+/=-]+")
"""What a token may hold: it travels in a header, a cookie and a query string unquoted."""
COOKIE = "swarmlog_console"
LOCAL_NAMES = ("localhost", "127.0.0.1", "[::1]", "::1")
HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        b"base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
"""Sent with every response: only the console's own script runs on its page, whatever a payload holds."""


@dataclasses.dataclass(frozen=True)
class ConsoleSettings:
    """Where the console listens and the token it asks for (SWARMLOG_CONSOLE_HOST/PORT/TOKEN, or the flags)."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **flags: Any) -> ConsoleSettings:
        """Settings from SWARMLOG_CONSOLE_* variables, overridden by the flags that are not None, and checked."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        if env.get("SWARMLOG_CONSOLE_HOST"):
            values["host"] = env["SWARMLOG_CONSOLE_HOST"]
        if env.get("SWARMLOG_CONSOLE_PORT"):
            try:
                values["port"] = int(env["SWARMLOG_CONSOLE_PORT"])
            except ValueError:
                raise ConfigError(
                    f"SWARMLOG_CONSOLE_PORT must be a TCP port, got {env['SWARMLOG_CONSOLE_PORT']!r}"
                ) from None
        if env.get("SWARMLOG_CONSOLE_TOKEN"):
            values["token"] = env["SWARMLOG_CONSOLE_TOKEN"]
        values.update({name: value for name, value in flags.items() if value is not None})
        settings = cls(**values)
        settings.check()
        return settings

    def check(self) -> None:
        """A ConfigError unless the settings are safe to serve: a port, and a token of MIN_TOKEN_CHARS or more
        whenever the console listens beyond the loopback."""
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"the console's port must be a TCP port (0-65535), got {self.port}")
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ConfigError(
                f"the console's token is {len(self.token)} characters; use at least {MIN_TOKEN_CHARS} "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(24))'`)"
            )
        if self.token is not None and not TOKEN_CHARS.fullmatch(self.token):
            raise ConfigError(
                "the console's token may hold only letters, digits and . _ ~ + / = - (it travels in a cookie and a "
                "header as it is); `secrets.token_urlsafe` makes one"
            )
        if not loopback(self.host) and self.token is None:
            raise ConfigError(
                f"the console would listen on {self.host}, beyond this machine, with no token: set "
                "SWARMLOG_CONSOLE_TOKEN (or pass --token) to require one, or bind 127.0.0.1 (the default)"
            )

    @property
    def url(self) -> str:
        """The address to open in a browser."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"


def loopback(host: str) -> bool:
    """Whether `host` is a loopback address (or `localhost`): only this machine can connect to it."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


class Gate:
    """ASGI middleware: GET and HEAD only; with a token, a request must carry it (the `Authorization: Bearer` header,
    the console's cookie, or `?token=` once, which sets the cookie); bound to the loopback, the Host must be a local
    name (a page elsewhere cannot reach the console through DNS rebinding); security headers on every response."""

    def __init__(self, app: ASGIApp, settings: ConsoleSettings) -> None:
        self.app = app
        self.token = settings.token.encode() if settings.token else None
        self.local_only = loopback(settings.host)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {name.decode("latin-1"): value for name, value in scope["headers"]}
        if scope["method"] not in ("GET", "HEAD"):
            await _refuse(send, 405, "the console is read-only")
            return
        if self.local_only and _hostname(headers.get("host", b"")) not in LOCAL_NAMES:
            await _refuse(send, 403, "this console answers only to localhost and 127.0.0.1")
            return
        if self.token is not None:
            query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
            from_query = query.get("token", [""])[0].encode()
            if from_query and hmac.compare_digest(from_query, self.token):
                await _with_cookie(send, self.token)  # the token leaves the address bar at once
                return
            if not self._carries_token(headers):
                await _refuse(
                    send, 401, "this console asks for its token: open /?token=TOKEN once, or send Authorization: Bearer"
                )
                return
        await self.app(scope, receive, _secured(send))

    def _carries_token(self, headers: Mapping[str, bytes]) -> bool:
        """Whether the request's Authorization header or cookie holds the token."""
        assert self.token is not None
        authorization = headers.get("authorization", b"")
        if authorization.startswith(b"Bearer ") and hmac.compare_digest(authorization[7:].strip(), self.token):
            return True
        cookie = SimpleCookie(headers.get("cookie", b"").decode("latin-1"))
        given = cookie[COOKIE].value.encode() if COOKIE in cookie else b""
        return bool(given) and hmac.compare_digest(given, self.token)


def _hostname(host: bytes) -> str:
    """The name part of a Host header (its port dropped; an IPv6 address keeps its brackets)."""
    text = host.decode("latin-1").strip().lower()
    if text.startswith("["):
        return text.partition("]")[0] + "]"
    return text.partition(":")[0]


def _secured(send: Send) -> Send:
    """`send` adding the security headers to the response's start."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *HEADERS]}
        await send(message)

    return sending


async def _refuse(send: Send, status: int, reason: str) -> None:
    """A plain-text refusal."""
    body = (reason + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": [*headers, *HEADERS]})
    await send({"type": "http.response.body", "body": body})


async def _with_cookie(send: Send, token: bytes) -> None:
    """A redirect to the page that leaves the token in an HttpOnly, same-site cookie."""
    cookie = f"{COOKIE}={token.decode()}; HttpOnly; SameSite=Strict; Path=/".encode()
    headers = [(b"location", b"/"), (b"set-cookie", cookie), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": 303, "headers": [*headers, *HEADERS]})
    await send({"type": "http.response.body", "body": b""})
