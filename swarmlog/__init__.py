"""swarmlog: an event-sourced actor system on Kafka that runs LLM agents across GPU clusters."""

__version__ = "0.1.0"
