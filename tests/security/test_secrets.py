"""Secrets travel as file paths, never as values: `up`'s export line, the environment `demo` and every supervisor give
their children, settings' reprs and the errors a refused connection raises."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka.errors import SaslAuthenticationFailed

from swarmlog.commands.up import export_line
from swarmlog.errors import ConfigError
from swarmlog.kafka.connection import denial, environment, plaintext
from swarmlog.services import Broker, Redis, Services
from swarmlog.settings import Settings

PASSWORD = "s3cret-value-never-shown"


@pytest.fixture
def secured(tmp_path: Path) -> Settings:
    """Settings for SASL_SSL with the password in a file, as an operator sets them."""
    (tmp_path / "password").write_text(PASSWORD + "\n")
    (tmp_path / "ca.pem").write_text("a CA\n")
    return Settings.from_env(
        {
            "SWARMLOG_BROKER": "external",
            "SWARMLOG_BOOTSTRAP": "kafka.example:9093",
            "SWARMLOG_KAFKA_SECURITY_PROTOCOL": "SASL_SSL",
            "SWARMLOG_KAFKA_USERNAME": "agent",
            "SWARMLOG_KAFKA_PASSWORD_FILE": str(tmp_path / "password"),
            "SWARMLOG_KAFKA_CA_FILE": str(tmp_path / "ca.pem"),
        }
    )


def test_the_export_line_carries_the_password_file_and_never_the_password(secured: Settings, tmp_path: Path):
    services = Services(Broker("external", "kafka.example:9093", True), Redis("redis://127.0.0.1:6379/0"))
    line = export_line(secured, services)
    assert PASSWORD not in line
    for variable in (
        "SWARMLOG_KAFKA_SECURITY_PROTOCOL=SASL_SSL",
        "SWARMLOG_KAFKA_SASL_MECHANISM=SCRAM-SHA-512",
        "SWARMLOG_KAFKA_USERNAME=agent",
        f"SWARMLOG_KAFKA_PASSWORD_FILE={tmp_path / 'password'}",
        f"SWARMLOG_KAFKA_CA_FILE={tmp_path / 'ca.pem'}",
    ):
        assert variable in line.split(), line
    assert "SWARMLOG_KAFKA_PASSWORD=" not in line


def test_a_child_gets_the_password_file_and_no_inherited_value(secured: Settings, tmp_path: Path):
    env = environment(secured)
    assert env["SWARMLOG_KAFKA_PASSWORD_FILE"] == str(tmp_path / "password")
    assert env["SWARMLOG_KAFKA_PASSWORD"] == ""  # overrides a value the parent's environment may hold
    assert PASSWORD not in "".join(env.values())
    assert (
        Settings.from_env(env | {"SWARMLOG_BROKER": "kafka", "SWARMLOG_BOOTSTRAP": "k:1"}).kafka_password.value
        == PASSWORD
    )


def test_a_password_given_as_a_value_is_not_passed_on():
    settings = Settings.from_env(
        {"SWARMLOG_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SWARMLOG_KAFKA_USERNAME": "agent",
         "SWARMLOG_KAFKA_PASSWORD": PASSWORD}
    )  # fmt: skip
    with pytest.raises(ConfigError, match="SWARMLOG_KAFKA_PASSWORD_FILE") as raised:
        environment(settings)
    assert PASSWORD not in str(raised.value)


def test_the_broker_up_and_demo_start_is_plaintext_whatever_the_environment_says(secured: Settings):
    env = environment(plaintext(secured))
    assert env["SWARMLOG_KAFKA_SECURITY_PROTOCOL"] == "PLAINTEXT"
    assert not any(value for name, value in env.items() if name != "SWARMLOG_KAFKA_SECURITY_PROTOCOL")


def test_settings_and_a_refusal_never_show_the_password(secured: Settings):
    assert PASSWORD not in repr(secured)
    assert str(secured.kafka_password) == "***"
    refusal = denial(secured, "kafka.example:9093", SaslAuthenticationFailed("invalid credentials"))
    assert refusal is not None
    assert PASSWORD not in str(refusal)
    assert "'agent'" in str(refusal) and "SCRAM-SHA-512" in str(refusal)
