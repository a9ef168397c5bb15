"""Who may read the console: the settings checked before it starts (`swarmlog console` exits 3 rather than listen beyond
the loopback without a token), and the gate a running console puts before every request."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from swarmlog.console.access import ConsoleSettings, loopback
from swarmlog.console.replaying import span
from swarmlog.errors import ConfigError
from swarmlog.replay.source import Span
from swarmlog.settings import Settings

from .test_browser import console, free_port, get

TOKEN = "a-console-token-for-the-test"


@pytest.mark.parametrize(
    ("host", "local"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True),
     ("0.0.0.0", False), ("192.168.1.4", False), ("::", False), ("console.example", False)],
)  # fmt: skip
def test_only_loopback_addresses_count_as_this_machine(host: str, local: bool) -> None:
    assert loopback(host) is local


def test_settings_come_from_the_environment_and_flags_win() -> None:
    env = {"SWARMLOG_CONSOLE_HOST": "0.0.0.0", "SWARMLOG_CONSOLE_PORT": "9000", "SWARMLOG_CONSOLE_TOKEN": TOKEN}
    assert ConsoleSettings.from_env(env) == ConsoleSettings("0.0.0.0", 9000, TOKEN)
    assert ConsoleSettings.from_env(env, host="127.0.0.1", port=9001).port == 9001
    assert ConsoleSettings.from_env({}) == ConsoleSettings("127.0.0.1", 8765, None)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"SWARMLOG_CONSOLE_HOST": "0.0.0.0"}, "SWARMLOG_CONSOLE_TOKEN"),
        ({"SWARMLOG_CONSOLE_HOST": "0.0.0.0", "SWARMLOG_CONSOLE_TOKEN": "short"}, "at least 16"),
        ({"SWARMLOG_CONSOLE_TOKEN": "sixteen chars; and more"}, "only letters, digits"),
        ({"SWARMLOG_CONSOLE_PORT": "http"}, "SWARMLOG_CONSOLE_PORT"),
        ({"SWARMLOG_CONSOLE_PORT": "70000"}, "TCP port"),
    ],
)
def test_unsafe_or_malformed_settings_are_refused_saying_what_to_do(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        ConsoleSettings.from_env(env)


def test_the_console_refuses_to_listen_beyond_the_loopback_without_a_token() -> None:
    env = {key: value for key, value in os.environ.items() if key != "SWARMLOG_CONSOLE_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "swarmlog", "console", "--host", "0.0.0.0", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert "SWARMLOG_CONSOLE_TOKEN" in done.stderr and "0.0.0.0" in done.stderr


def test_a_console_with_a_token_asks_for_it_and_answers_only_to_local_names(settings: Settings, tmp_path: Path) -> None:
    with console(settings, tmp_path, token=TOKEN) as url:
        assert get(f"{url}/api/missions")[0] == 401
        assert get(f"{url}/api/missions", {"Authorization": "Bearer wrong-token-of-some-length"})[0] == 401
        status, headers, _ = get(f"{url}/?token={TOKEN}")
        assert status == 303 and headers["location"] == "/" and "HttpOnly" in headers["set-cookie"]
        cookie = headers["set-cookie"].split(";")[0]
        assert get(f"{url}/api/missions", {"Cookie": cookie})[0] == 200
        status, headers, _ = get(f"{url}/", {"Authorization": f"Bearer {TOKEN}"})
        assert status == 200 and "script-src 'self'" in headers["content-security-policy"]
        assert get(f"{url}/api/missions", {"Authorization": f"Bearer {TOKEN}", "Host": "evil.example"})[0] == 403


def test_a_replays_at_is_an_offset_epoch_milliseconds_or_an_iso_time() -> None:
    assert span(None) == span("") == Span()
    assert span("42") == Span(to_offset=42)
    assert span("1764633600000") == Span(to_ms=1_764_633_600_000)
    assert span("2025-12-02T00:00:00") == span("2025-12-02T00:00:00+00:00") == Span(to_ms=1_764_633_600_000)
    with pytest.raises(ConfigError, match="neither an offset"):
        span("yesterday")
