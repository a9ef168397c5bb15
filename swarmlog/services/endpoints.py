"""Where the running services listen and what they can do, whoever started them."""

from __future__ import annotations

import dataclasses

from swarmlog.services.process import Child
from swarmlog.settings import BrokerKind


@dataclasses.dataclass(frozen=True)
class Broker:
    """A Kafka-compatible broker to connect to; `child` is set when swarmlog runs it as a local process."""

    kind: BrokerKind
    bootstrap: str
    supports_transactions: bool
    child: Child | None = None

    @property
    def pid(self) -> int | None:
        """The broker's process id when swarmlog runs it."""
        return None if self.child is None else self.child.pid


@dataclasses.dataclass(frozen=True)
class Redis:
    """A Redis server to connect to; `child` is set when swarmlog runs it as a local process."""

    url: str
    child: Child | None = None

    @property
    def pid(self) -> int | None:
        """The server's process id when swarmlog runs it."""
        return None if self.child is None else self.child.pid


@dataclasses.dataclass(frozen=True)
class Services:
    """The broker and the Redis server a process uses."""

    broker: Broker
    redis: Redis

    @property
    def children(self) -> tuple[Child, ...]:
        """The processes swarmlog runs for these services (none for external ones)."""
        return tuple(child for child in (self.broker.child, self.redis.child) if child is not None)
