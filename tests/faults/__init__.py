"""Broker faults on real Kafka: bounces and outages of a single broker, node and controller loss on a cluster."""
