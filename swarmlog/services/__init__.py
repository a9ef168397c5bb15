"""Fixture layer: real Apache Kafka, Tansu, Redis, Docker containers or external services, started and stopped as processes."""
