"""Readiness probes that make a real protocol round-trip: Kafka metadata, Redis PING."""

from __future__ import annotations

import asyncio
import concurrent.futures
import socket
from collections.abc import Mapping
from typing import Any

from aiokafka import AIOKafkaClient
from aiokafka.errors import KafkaError

from swarmlog.errors import ServiceError
from swarmlog.redis_connection import RedisAccess


async def _kafka_has_brokers(bootstrap: str, security: Mapping[str, Any]) -> bool:
    """Bootstrap a client (ApiVersions + Metadata) and report whether a broker is registered."""
    client = AIOKafkaClient(
        bootstrap_servers=bootstrap, request_timeout_ms=2000, connections_max_idle_ms=5000, **security
    )
    try:
        await client.bootstrap()
        return bool(client.cluster.brokers())
    except (TimeoutError, KafkaError, OSError):
        return False
    finally:
        await client.close()


def kafka_answers(bootstrap: str, security: Mapping[str, Any] | None = None) -> bool:
    """Whether a Kafka broker at `bootstrap` answers a metadata request and lists itself; `security` holds aiokafka's
    options for a TLS or SASL listener (security_protocol, ssl_context, sasl_*)."""
    # A plain connect first: aiokafka logs an error for every refused connection.
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=2).close()
    except OSError:
        return False
    # A fresh thread owns its own event loop, so this works whether or not the caller runs one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, _kafka_has_brokers(bootstrap, security or {})).result()


def redis_answers(access: RedisAccess) -> bool:
    """Whether the Redis server `access` points at answers its PING."""
    try:
        access.check()
    except ServiceError:
        return False
    return True
