"""How every Kafka client of swarmlog connects: bootstrap servers, TLS and SASL, from the settings alone.

aiokafka's producers, consumers and admin clients take `client_options(settings)`; the streams worker's Faust app
takes `faust_credentials(settings)`. Nothing else builds a connection, so a secured cluster reaches every process."""

from __future__ import annotations

import ssl
from typing import Any

from swarmlog.settings import Settings


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
    options: dict[str, Any] = {
        "bootstrap_servers": settings.bootstrap,
        "security_protocol": settings.kafka_security_protocol,
    }
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
