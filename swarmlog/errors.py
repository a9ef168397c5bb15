"""Typed errors: one root, a reason that says what happened and what to do, and whether a retry may help."""

from __future__ import annotations


class SwarmlogError(Exception):
    """Root of every error swarmlog raises on purpose."""

    retriable: bool = False


class ConfigError(SwarmlogError):
    """A setting is missing, malformed or points at nothing; the message says which and how to fix it."""


class ServiceError(SwarmlogError):
    """A broker, Redis or another service could not be started, reached or stopped."""

    retriable = True


class AccessDenied(ServiceError):
    """A service refused our user, password or certificate: a retry will not help, a setting must change."""

    retriable = False


class DecodeError(SwarmlogError):
    """Bytes that are not a valid swarmlog event: garbage, truncated, unknown schema, or a broken invariant."""

    def __init__(
        self,
        reason: str,
        *,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.reason = reason
        self.topic = topic
        self.partition = partition
        self.offset = offset
        super().__init__(self._describe())

    def at(self, topic: str, partition: int, offset: int) -> DecodeError:
        """The same error located at a record's coordinates in the log."""
        return DecodeError(self.reason, topic=topic, partition=partition, offset=offset)

    def _describe(self) -> str:
        where = "" if self.topic is None else f" at {self.topic}[{self.partition}]@{self.offset}"
        return f"undecodable record{where}: {self.reason}"


class EncodeError(SwarmlogError):
    """A record that cannot be written: it does not match its schema, breaks an invariant, or is too large."""


class SchemaCompatibilityError(SwarmlogError):
    """A schema version is not backward and forward compatible with the version before it."""
