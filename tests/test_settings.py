"""Settings come from SWARMLOG_* variables and flags, and wrong values fail at start with a clear message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from swarmlog.errors import ConfigError
from swarmlog.settings import Settings, parse_bootstrap


def test_environment_then_flags() -> None:
    env = {"SWARMLOG_BOOTSTRAP": "k1:9092,k2:9093", "SWARMLOG_REGIONS": "2", "SWARMLOG_CACHE_DIR": "/tmp/c"}

    settings = Settings.from_env(env, regions=3)

    assert settings.broker == "external"
    assert settings.bootstrap == "k1:9092,k2:9093"
    assert settings.regions == 3
    assert settings.cache_dir == Path("/tmp/c")
    assert settings.region_names == ("region-0", "region-1", "region-2")


def test_settings_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        Settings().regions = 9  # type: ignore[misc]


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SWARMLOG_BROKER": "rabbit"}, "SWARMLOG_BROKER='rabbit' is not a broker kind"),
        ({"SWARMLOG_BROKER": "external"}, "SWARMLOG_BROKER=external needs SWARMLOG_BOOTSTRAP"),
        ({"SWARMLOG_BOOTSTRAP": "localhost"}, "bootstrap server 'localhost' is not host:port"),
        ({"SWARMLOG_REGIONS": "two"}, "SWARMLOG_REGIONS='two' is not a whole number"),
        ({"SWARMLOG_REGIONS": "0"}, "SWARMLOG_REGIONS must be at least 1"),
        ({"SWARMLOG_REDIS_URL": "localhost:6379"}, "must start with redis://"),
    ],
)
def test_wrong_values_name_the_variable_and_the_fix(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        Settings.from_env(env)


def test_bootstrap_lists_parse_ipv6_and_names() -> None:
    assert parse_bootstrap("[::1]:9092, broker:19092") == [("::1", 9092), ("broker", 19092)]


def test_a_password_comes_from_its_file_first_and_is_never_shown(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("s3cret-from-file\nignored second line\n")
    env = {
        "SWARMLOG_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
        "SWARMLOG_KAFKA_USERNAME": "agent-7",
        "SWARMLOG_KAFKA_PASSWORD": "s3cret-from-env",
        "SWARMLOG_KAFKA_PASSWORD_FILE": str(secret),
        "SWARMLOG_KAFKA_CHECK_HOSTNAME": "false",
    }

    settings = Settings.from_env(env)

    assert settings.kafka_password is not None and settings.kafka_password.value == "s3cret-from-file"
    assert settings.kafka_password.path == secret
    assert settings.kafka_check_hostname is False and settings.kafka_tls
    assert "s3cret" not in repr(settings) and "s3cret" not in str(settings.kafka_password)


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"SWARMLOG_KAFKA_SECURITY_PROTOCOL": "SASL_SSL", "SWARMLOG_KAFKA_USERNAME": "a"}, "PASSWORD_FILE"),
        ({"SWARMLOG_KAFKA_SECURITY_PROTOCOL": "TLS"}, "is not one of"),
        ({"SWARMLOG_KAFKA_SASL_MECHANISM": "GSSAPI"}, "is not one of"),
        ({"SWARMLOG_KAFKA_PASSWORD_FILE": "/nonexistent/password"}, "cannot be read"),
        ({"SWARMLOG_KAFKA_CA_FILE": "/nonexistent/ca.pem"}, "is not a readable file"),
        ({"SWARMLOG_KAFKA_CHECK_HOSTNAME": "maybe"}, "is not true or false"),
    ],
)
def test_security_settings_that_cannot_work_fail_at_start(env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Settings.from_env(env)
