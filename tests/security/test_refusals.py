"""What a refused process says: a wrong password ends a real CLI process at once with exit 4 and the user, mechanism
and password file to check; a certificate the broker does not accept (unknown, expired, none) and a broker
certificate the client does not trust are refused with a message that says TLS and why."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from swarmlog.commands.common import EXIT_SERVICE
from swarmlog.errors import AccessDenied
from swarmlog.kafka.producer import EventProducer
from swarmlog.services.certs import Issued
from swarmlog.settings import Secret, Settings

from .secured import SecuredKafka, process_environment

FAST_S = 60
"""A refused process must be done well within this (it takes seconds); one that retried would hang until it."""


def swarmlog(settings: Settings, *argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m swarmlog ARGV` with the settings in its environment, as an operator's shell gives them."""
    return subprocess.run(
        [sys.executable, "-m", "swarmlog", *argv],
        env=os.environ | process_environment(settings),
        capture_output=True,
        text=True,
        timeout=FAST_S,
    )


@pytest.mark.parametrize(
    "argv",
    [("topics", "ensure"), ("submit", "examples/pipeline.yaml"), ("coordinator", "--region", "region-0")],
    ids=["topics-ensure", "submit", "coordinator"],
)
def test_a_wrong_password_ends_the_process_at_once_with_exit_4_and_what_to_check(
    secured_kafka: SecuredKafka, tmp_path: Path, argv: tuple[str, ...]
):
    (tmp_path / "password").write_text("not-the-password\n")
    wrong = Secret.from_file(tmp_path / "password", "SWARMLOG_KAFKA_PASSWORD_FILE")
    settings = dataclasses.replace(secured_kafka.settings_for("coordinator"), kafka_password=wrong)
    started = time.monotonic()
    done = swarmlog(settings, *argv, *(["--data-dir", str(tmp_path)] if argv[0] == "coordinator" else []))
    print(
        f"\n`swarmlog {' '.join(argv)}` refused in {time.monotonic() - started:.1f} s: {done.stderr.splitlines()[-1]}"
    )
    assert done.returncode == EXIT_SERVICE, done.stderr
    assert "refused user 'coordinator' with SCRAM-SHA-512" in done.stderr
    assert str(tmp_path / "password") in done.stderr  # where the password came from, never the password
    assert "not-the-password" not in done.stderr + done.stdout


async def test_a_client_certificate_from_an_unknown_authority_is_refused(secured_kafka: SecuredKafka):
    stranger = secured_kafka.stranger.client("operator")
    await refused(secured_kafka.settings_for("operator", "SSL"), "TLS: .* refused this client", cert=stranger)


async def test_an_expired_client_certificate_is_refused(secured_kafka: SecuredKafka):
    expired = secured_kafka.authority.issue("operator-expired", "operator", expired=True)
    await refused(secured_kafka.settings_for("operator", "SSL"), "TLS: .* refused this client", cert=expired)


async def test_a_client_without_a_certificate_is_refused_on_the_mutual_tls_listener(secured_kafka: SecuredKafka):
    settings = dataclasses.replace(
        secured_kafka.settings_for("operator", "SSL"), kafka_cert_file=None, kafka_key_file=None
    )
    await refused(settings, "TLS: .* refused this client, which presented no certificate")


async def test_a_principal_without_acls_is_told_what_its_producer_needs(secured_kafka: SecuredKafka):
    nobody = secured_kafka.authority.client("nobody")  # a certificate the broker accepts, for a principal with no ACL
    await refused(
        secured_kafka.settings_for("operator", "SSL"),
        "does not let the principal of certificate .*nobody.pem start an idempotent producer .*ClusterAuthorization",
        cert=nobody,
    )


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL"])
async def test_a_broker_certificate_the_client_does_not_trust_is_refused(secured_kafka: SecuredKafka, protocol: str):
    trusting_another = dataclasses.replace(
        secured_kafka.settings_for("operator", protocol),  # type: ignore[arg-type]
        kafka_ca_file=secured_kafka.stranger.cert,
    )
    await refused(trusting_another, "TLS: the certificate of the Kafka broker at .* is not trusted")


async def refused(settings: Settings, message: str, cert: Issued | None = None) -> None:
    """Assert that swarmlog's producer cannot start with these settings (and client certificate) and says `message`."""
    if cert is not None:
        settings = dataclasses.replace(settings, kafka_cert_file=cert.cert, kafka_key_file=cert.key)
    with pytest.raises(AccessDenied, match=message) as raised:
        async with EventProducer(settings, client_id="test-refused"):
            pass
    print(f"\n{raised.value}")
