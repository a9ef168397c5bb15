"""How every Kafka client of swarmlog connects: bootstrap servers, TLS and SASL, from the settings alone.

aiokafka's producers, consumers and admin clients take `client_options(settings)`; the streams worker's Faust app
takes `faust_credentials(settings)`. Nothing else builds a connection, so a secured cluster reaches every process."""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any

from aiokafka.conn import create_conn
from aiokafka.errors import (
    AuthenticationFailedError,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanismError,
)
from aiokafka.protocol.metadata import MetadataRequest

from swarmlog.errors import AccessDenied, ConfigError, ServiceError
from swarmlog.settings import Settings, parse_bootstrap

PROBE_TIMEOUT_MS = 5000
SASL_REFUSALS = (
    SaslAuthenticationFailed,
    AuthenticationFailedError,
    IllegalSaslStateError,
    UnsupportedSaslMechanismError,
)


def ssl_context(settings: Settings) -> ssl.SSLContext | None:
    """The TLS context for SSL and SASL_SSL (CA file, client certificate for mutual TLS, hostname check), else None."""
    if not settings.kafka_tls:
        return None
    context = ssl.create_default_context(
        purpose=ssl.Purpose.SERVER_AUTH, cafile=str(settings.kafka_ca_file) if settings.kafka_ca_file else None
    )
    context.check_hostname = settings.kafka_check_hostname
    if settings.kafka_cert_file is not None and settings.kafka_key_file is not None:
        context.load_cert_chain(str(settings.kafka_cert_file), str(settings.kafka_key_file))
    return context


def client_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments every aiokafka client is built with: where the brokers are and how to authenticate."""
    return {"bootstrap_servers": settings.bootstrap, **security_options(settings)}


def security_options(settings: Settings) -> dict[str, Any]:
    """aiokafka's keyword arguments for TLS and SASL alone (security_protocol, ssl_context, sasl_*)."""
    options: dict[str, Any] = {"security_protocol": settings.kafka_security_protocol}
    context = ssl_context(settings)
    if context is not None:
        options["ssl_context"] = context
    if settings.kafka_security_protocol.startswith("SASL_"):
        assert settings.kafka_password is not None  # Settings refuses SASL without one
        options.update(
            sasl_mechanism=settings.kafka_sasl_mechanism,
            sasl_plain_username=settings.kafka_username,
            sasl_plain_password=settings.kafka_password.value,
        )
    return options


def faust_credentials(settings: Settings) -> Any:
    """Faust's `broker_credentials` for the same connection (None: plaintext)."""
    from faust.auth import SASLCredentials, SSLCredentials

    context = ssl_context(settings)
    if settings.kafka_security_protocol.startswith("SASL_"):
        assert settings.kafka_password is not None
        return SASLCredentials(
            username=settings.kafka_username,
            password=settings.kafka_password.value,
            ssl_context=context,
            mechanism=settings.kafka_sasl_mechanism,
        )
    return SSLCredentials(context) if context is not None else None


def environment(settings: Settings) -> dict[str, str]:
    """The SWARMLOG_KAFKA_* variables that give a child process (or a shell, through an export line) the same
    connection: every one, empty where it does not apply so that an inherited value does not either; the password only
    as the file it was read from (SWARMLOG_KAFKA_PASSWORD is always empty). A ConfigError when it came from no file."""
    password = settings.kafka_password
    if password is not None and password.path is None:
        raise ConfigError(
            f"the Kafka password comes from {password.source}, and other processes are given secrets as files only: "
            "put it in a file readable by this user alone and set SWARMLOG_KAFKA_PASSWORD_FILE to its path"
        )
    sasl = settings.kafka_security_protocol.startswith("SASL_")
    values = {
        "SECURITY_PROTOCOL": settings.kafka_security_protocol,
        "SASL_MECHANISM": settings.kafka_sasl_mechanism if sasl else None,
        "USERNAME": settings.kafka_username,
        "PASSWORD": None,
        "PASSWORD_FILE": password and password.path,
        "CA_FILE": settings.kafka_ca_file,
        "CERT_FILE": settings.kafka_cert_file,
        "KEY_FILE": settings.kafka_key_file,
        "CHECK_HOSTNAME": str(settings.kafka_check_hostname).lower() if settings.kafka_tls else None,
    }
    return {f"SWARMLOG_KAFKA_{name}": "" if value is None else str(value) for name, value in values.items()}


def plaintext(settings: Settings) -> Settings:
    """The settings for a broker that swarmlog starts itself (`up`, `demo`): plaintext, whatever the environment says
    about a secured one."""
    return dataclasses.replace(
        settings,
        kafka_security_protocol="PLAINTEXT",
        kafka_username=None,
        kafka_password=None,
        kafka_ca_file=None,
        kafka_cert_file=None,
        kafka_key_file=None,
    )


def identity(settings: Settings) -> str:
    """Who this process is to the brokers, in words for a message: its SASL user, its certificate, or nobody."""
    if settings.kafka_security_protocol.startswith("SASL_"):
        return f"user {settings.kafka_username!r}"
    if settings.kafka_cert_file is not None:
        return f"the principal of certificate {settings.kafka_cert_file}"
    return "an anonymous client"


async def start(client: Any, settings: Settings) -> None:
    """Start an aiokafka client; one that cannot connect is closed, and raises what `unreachable` says."""
    try:
        await client.start()
    except KafkaError as exc:
        await client.stop() if hasattr(client, "stop") else await client.close()
        raise await unreachable(settings, exc) from exc


async def unreachable(settings: Settings, exc: KafkaError) -> ServiceError:
    """The error of a client that could not connect: AccessDenied when the brokers refuse this process (why, and what
    to check; a retry will not help), else a ServiceError that asks whether the broker is up."""
    denied = await access_denied(settings)
    return denied or ServiceError(f"cannot reach the broker at {settings.bootstrap}: {exc}; is it up?")


async def access_denied(settings: Settings) -> AccessDenied | None:
    """Why the brokers refuse this process, if they do, from one connection made as the settings say (TLS, SASL and a
    metadata request): its password or mechanism, the broker's certificate, or its own certificate. None when one
    broker accepts it or none answers at all (not a matter of access).

    aiokafka logs why a connection failed and raises only "Unable to bootstrap"; this is what a client that could not
    start raises instead, so that the user reads the reason and what to check, once, rather than a retry loop."""
    assert settings.bootstrap is not None
    for host, port in parse_bootstrap(settings.bootstrap):
        failure = await _attempt(settings, host, port)
        if failure is None:
            return None
        denied = denial(settings, f"{host}:{port}", failure)
        if denied is not None:
            return denied
    return None


async def _attempt(settings: Settings, host: str, port: int) -> BaseException | None:
    """Why one connection to a broker and a metadata request on it failed, or None when the broker answered."""
    try:
        connection = await create_conn(host, port, request_timeout_ms=PROBE_TIMEOUT_MS, **security_options(settings))
    except (KafkaError, OSError, TimeoutError) as exc:
        return exc
    try:
        await connection.send(MetadataRequest([]))
    except (KafkaError, OSError, TimeoutError) as exc:
        return exc
    finally:
        connection.close()
    return None


def denial(settings: Settings, where: str, exc: BaseException) -> AccessDenied | None:
    """The AccessDenied a failed connection to `where` means, with the settings to check; None if it is no refusal."""
    if isinstance(exc, SASL_REFUSALS):
        assert settings.kafka_password is not None
        return AccessDenied(
            f"Kafka at {where} refused user {settings.kafka_username!r} with {settings.kafka_sasl_mechanism}: {exc}. "
            f"Check SWARMLOG_KAFKA_USERNAME, the password ({settings.kafka_password.source}) and "
            "SWARMLOG_KAFKA_SASL_MECHANISM: the broker must hold a credential of that mechanism for this user"
        )
    if isinstance(exc, ssl.SSLCertVerificationError):
        trusted = settings.kafka_ca_file or "unset: the system's CAs"
        return AccessDenied(
            f"TLS: the certificate of the Kafka broker at {where} is not trusted ({exc.verify_message}). "
            f"SWARMLOG_KAFKA_CA_FILE ({trusted}) must hold the CA that signed it, and the certificate must name the "
            "host in SWARMLOG_BOOTSTRAP (or set SWARMLOG_KAFKA_CHECK_HOSTNAME=false) and be in date"
        )
    alert = exc if isinstance(exc, ssl.SSLError) else exc.__cause__
    if isinstance(alert, ssl.SSLError):  # the broker ended the handshake: the TLS 1.3 alert arrives on the first read
        presented = f"its certificate {settings.kafka_cert_file}" if settings.kafka_cert_file else "no certificate"
        return AccessDenied(
            f"TLS: the Kafka broker at {where} refused this client, which presented {presented} ({alert.reason}). A "
            "listener that requires client certificates (ssl.client.auth=required) takes one that is in date and "
            "signed by a CA in its truststore: check SWARMLOG_KAFKA_CERT_FILE and SWARMLOG_KAFKA_KEY_FILE"
        )
    return None
