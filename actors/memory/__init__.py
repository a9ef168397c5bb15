"""The agents' semantic memory: embeddings, an in-process vector index, and the Redis memory bus."""
