"""Agent actors: one process per GPU, a constrained LLM step loop, memory, heartbeats, token usage."""
