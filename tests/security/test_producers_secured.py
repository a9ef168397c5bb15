"""The producers of clients/ (Node, Java, kcat) on the secured Kafka: missions over SASL_SSL with each mechanism and
over mutual TLS reach a real coordinator; a wrong password, an untrusted broker or an unknown client certificate ends
with exit 4 and one line that names the cause and shows no password; a setting that cannot work with exit 3."""

from __future__ import annotations

import dataclasses
import secrets
import uuid
from pathlib import Path

import pytest
from client_producers import EACH_PRODUCER, REGION, Producer, completed, produce, region_0, run
from coordinator.live import eventually

from swarmlog.kafka.connection import environment
from swarmlog.schemas.records import MissionAccepted, MissionCompleted
from swarmlog.settings import Secret, Settings

from .secured import SCRAM, SecuredKafka

pytestmark = EACH_PRODUCER
MECHANISMS = (*SCRAM, "PLAIN")


def flags(settings: Settings) -> list[str]:
    """The producers' flags for the settings' connection: the SWARMLOG_KAFKA_* variables that carry it, each as the
    flag of the same name (--ca-file for SWARMLOG_KAFKA_CA_FILE), the hostname check as --no-check-hostname."""
    args = []
    for variable, value in environment(settings).items():
        flag = "--" + variable.removeprefix("SWARMLOG_KAFKA_").lower().replace("_", "-")
        if flag == "--check-hostname":
            args += ["--no-check-hostname"] if value == "false" else []
        elif value:
            args += [flag, value]
    return args


async def test_missions_over_sasl_ssl_and_mutual_tls_complete(
    producer: Producer, secured_kafka: SecuredKafka, tmp_path: Path
):
    capability = f"{producer.name}-{uuid.uuid4().hex[:8]}"
    mission = ("--region", REGION, "--task", "a=say a", "--capability", capability)
    coordinator = secured_kafka.settings_for("coordinator")
    missions = {}
    async with region_0(coordinator, capability, producer.first_slot, tmp_path):
        for mechanism in MECHANISMS:  # settings as flags
            sasl = secured_kafka.settings_for("producer", "SASL_SSL", mechanism)
            missions[mechanism] = await produce(producer, sasl, *flags(sasl), "--title", mechanism, *mission)
        mtls = secured_kafka.settings_for("producer", "SSL")  # settings as SWARMLOG_KAFKA_* variables
        missions["mutual TLS"] = await produce(producer, mtls, "--title", "mutual TLS", *mission, env=environment(mtls))
        journals = {
            how: await eventually(lambda mission_id=mission_id: completed(coordinator, mission_id))
            for how, mission_id in missions.items()
        }
    for how, events in journals.items():
        [accepted] = [event for event in events if isinstance(event, MissionAccepted)]
        [done] = [event for event in events if isinstance(event, MissionCompleted)]
        assert (accepted.title, done.success, done.tasks_completed) == (how, True, 1)


def refusal(secured_kafka: SecuredKafka, cause: str, tmp_path: Path) -> Settings:
    """The producer role's settings with one thing wrong."""
    producer = secured_kafka.settings_for("producer")
    if cause == "wrong password":
        wrong = tmp_path / "wrong-password"
        wrong.write_text(secrets.token_urlsafe(18) + "\n")
        return dataclasses.replace(producer, kafka_password=Secret.from_file(wrong, "SWARMLOG_KAFKA_PASSWORD_FILE"))
    if cause.startswith("untrusted broker"):  # without the hostname check, the chain is still verified
        checked = cause == "untrusted broker"
        return dataclasses.replace(producer, kafka_ca_file=secured_kafka.stranger.cert, kafka_check_hostname=checked)
    unknown = secured_kafka.stranger.client("producer")  # an unknown client certificate, on the mutual-TLS listener
    mtls = secured_kafka.settings_for("producer", "SSL")
    return dataclasses.replace(mtls, kafka_cert_file=unknown.cert, kafka_key_file=unknown.key)


SAYS = {
    "wrong password": "authentication failed at Kafka at",
    "untrusted broker": "cannot connect to Kafka at",
    "untrusted broker, no hostname check": "cannot connect to Kafka at",
    "unknown client certificate": "cannot connect to Kafka at",
}
"""How each refusal's line starts."""


@pytest.mark.parametrize("cause", SAYS)
async def test_a_refused_connection_exits_4_with_one_line_and_no_password(
    producer: Producer, secured_kafka: SecuredKafka, tmp_path: Path, cause: str
):
    settings = refusal(secured_kafka, cause, tmp_path)
    done = await run(producer, settings, *flags(settings), "--task", "a=say a")
    assert done.status == 4, done
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(
        f"produce-mission: {SAYS[cause]} {settings.bootstrap} ({settings.kafka_security_protocol}"
    ), line
    assert done.stdout == ""
    passwords = [settings.kafka_password, secured_kafka.settings_for("producer").kafka_password]
    for password in filter(None, passwords):
        assert password.value not in done.stderr


MISTAKES = {
    "unknown protocol": (
        ["--security-protocol", "TLS"],
        "--security-protocol (SWARMLOG_KAFKA_SECURITY_PROTOCOL) is TLS; use one of PLAINTEXT, SSL, SASL_PLAINTEXT, "
        "SASL_SSL",
    ),
    "unknown mechanism": (
        ["--sasl-mechanism", "GSSAPI"],
        "--sasl-mechanism (SWARMLOG_KAFKA_SASL_MECHANISM) is GSSAPI; use one of SCRAM-SHA-512, SCRAM-SHA-256, PLAIN",
    ),
    "SASL without a username": (
        ["--security-protocol", "SASL_SSL", "--password-file", "{password}"],
        "--security-protocol SASL_SSL needs --username (SWARMLOG_KAFKA_USERNAME) and --password-file "
        "(SWARMLOG_KAFKA_PASSWORD_FILE) (or SWARMLOG_KAFKA_PASSWORD)",
    ),
    "a certificate without its key": (
        ["--security-protocol", "SSL", "--cert-file", "{cert}"],
        "mutual TLS needs both --cert-file (SWARMLOG_KAFKA_CERT_FILE) and --key-file (SWARMLOG_KAFKA_KEY_FILE)",
    ),
    "a certificate on plaintext": (
        ["--cert-file", "{cert}", "--key-file", "{key}"],
        "--cert-file (SWARMLOG_KAFKA_CERT_FILE) is set but --security-protocol is PLAINTEXT; use SSL (mutual TLS) or "
        "SASL_SSL",
    ),
    "no CA file": (
        ["--security-protocol", "SSL", "--ca-file", "/nonexistent/ca.pem"],
        "--ca-file (SWARMLOG_KAFKA_CA_FILE) /nonexistent/ca.pem is not a readable file",
    ),
    "a hostname check that is not a boolean": (
        ["SWARMLOG_KAFKA_CHECK_HOSTNAME=maybe"],  # a variable: it has no flag
        "SWARMLOG_KAFKA_CHECK_HOSTNAME=maybe is not true or false",
    ),
}
"""Settings the producers refuse before connecting (flags, or VARIABLE=value), and what each says: as
swarmlog/settings.py refuses them, in the same words from every client."""


@pytest.mark.parametrize("mistake", MISTAKES)
async def test_a_setting_that_cannot_work_exits_3(producer: Producer, secured_kafka: SecuredKafka, mistake: str):
    user = secured_kafka.users["producer"]
    files = {"password": user.password_file, "cert": user.cert.cert, "key": user.cert.key}
    args, message = MISTAKES[mistake]
    given = [arg.format(**files) for arg in args]
    variables = dict(arg.split("=", 1) for arg in given if arg.startswith("SWARMLOG_"))
    options = [arg for arg in given if not arg.startswith("SWARMLOG_")]
    done = await run(producer, secured_kafka.settings_for("producer"), *options, "--task", "a=say a", env=variables)
    assert (done.status, done.stderr.strip()) == (3, f"produce-mission: {message}")
