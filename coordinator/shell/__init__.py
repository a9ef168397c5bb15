"""The coordinator's shell: Kafka around the pure core (it imports aiokafka and rocksdict; the core does not)."""

from swarmlog.coordinator.shell.service import CoordinatorService

__all__ = ["CoordinatorService"]
