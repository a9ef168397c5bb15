"""The agent's shell: the process around the pure fold (Kafka in and out, its checkpoint store, recovery, re-sync)."""
