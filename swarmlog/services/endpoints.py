"""Where the running services listen and what they can do, whoever started them."""

from __future__ import annotations

import dataclasses

from swarmlog.settings import BrokerKind


@dataclasses.dataclass(frozen=True)
class Broker:
    """A Kafka-compatible broker to connect to; `pid` is set when swarmlog runs it as a local process."""

    kind: BrokerKind
    bootstrap: str
    supports_transactions: bool
    pid: int | None = None


@dataclasses.dataclass(frozen=True)
class Redis:
    """A Redis server to connect to; `pid` is set when swarmlog runs it as a local process."""

    url: str
    pid: int | None = None


@dataclasses.dataclass(frozen=True)
class Services:
    """The broker and the Redis server a process uses."""

    broker: Broker
    redis: Redis
