"""Kafka adapters: admin, producing and consuming swarmlog events."""
