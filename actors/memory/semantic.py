"""An agent's semantic memory: what it and other nodes remembered, recalled by meaning from an in-process index.

`remember` puts an ExperienceRecorded into the index at once and queues its Redis write; queued writes go out every
flush interval in one pipeline. With Redis configured, `start` hydrates the index from the bus (feed end noted, then
one scan) and a follower adds what other nodes write, read from the bus's feed. Without Redis it is local only.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import numpy as np
import redis.asyncio as aioredis
from redis.exceptions import RedisError

from swarmlog import memorybus
from swarmlog.actors.memory.embeddings import MiniLM, shared_model
from swarmlog.actors.memory.index import Hit, VectorIndex
from swarmlog.envelope import now_ms
from swarmlog.lifecycle import Running
from swarmlog.redis_connection import RedisAccess
from swarmlog.schemas.records import ExperienceRecorded
from swarmlog.streams.memory import DEFAULT_FLUSH_INTERVAL_MS, MemoryWrite, plan_write

DIMENSION = 384
FOLLOW_BLOCK_MS = 1000
RETRY_S = 1.0
log = logging.getLogger("swarmlog.memory")


class SemanticMemory(Running):
    """Remember experiences, recall the nearest ones; start it (or `async with` it) before use."""

    def __init__(
        self, redis: RedisAccess | None, flush_ms: int = DEFAULT_FLUSH_INTERVAL_MS, model: MiniLM | None = None
    ) -> None:
        self._redis, self._flush_s = redis, flush_ms / 1000
        self._model = model
        self._index = VectorIndex(DIMENSION)
        self._pending: list[MemoryWrite] = []
        self._client: aioredis.Redis | None = None
        self._started = False
        self._stopping = asyncio.Event()
        self._follower: asyncio.Task[None] | None = None
        self._flusher: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """With Redis, hydrate the index from the bus, then follow it and flush writes in the background."""
        if self._started:
            raise RuntimeError("SemanticMemory.start() called twice")
        self._started = True
        if self._redis is None:
            return
        client = self._redis.client()
        try:
            position = await memorybus.feed_end(client)
            async for chunk in memorybus.scan(client):
                self._add(chunk)
        except RedisError as exc:
            await client.aclose()
            raise self._redis.failure(exc) from exc
        self._client = client
        self._follower = asyncio.create_task(self._follow(position))
        self._flusher = asyncio.create_task(self._flush_every())

    async def stop(self) -> None:
        """Stop following, flush what is queued, close the connection (idempotent)."""
        if self._client is None:
            return
        self._stopping.set()
        if self._follower is not None:
            self._follower.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._follower
        if self._flusher is not None:
            await self._flusher  # its last round flushes what is still queued
        await self._client.aclose()
        self._client = self._follower = self._flusher = None

    def __len__(self) -> int:
        return len(self._index)

    async def embed(self, text: str) -> list[float]:
        """The embedding of `text`, computed off the event loop."""
        embedding: list[float] = (await asyncio.to_thread(self._embedded, text)).tolist()
        return embedding

    def _embedded(self, text: str) -> np.ndarray:
        """The embedding of `text`, loading the model on first use (an agent that never remembers never loads it)."""
        if self._model is None:
            self._model = shared_model()
        embedding: np.ndarray = self._model.embed([text])[0]
        return embedding

    def remember(self, experience: ExperienceRecorded) -> None:
        """Index an ExperienceRecorded now and queue its write to the bus for the next flush."""
        write = plan_write(experience, now_ms())
        if write is None:
            return
        embedding = np.asarray(experience.embedding, np.float32)
        self._index.add(write.key, embedding, experience.content, write.expire_at_ms)
        if self._client is not None:
            self._pending.append(write)

    async def recall(self, text: str, k: int = 3) -> list[Hit]:
        """The `k` live memories nearest in meaning to `text`, best first (no embedding when there are none)."""
        if not len(self._index):
            return []
        query = np.asarray(await self.embed(text), np.float32)
        return self._index.search(query, k, now_ms())

    async def flush(self) -> None:
        """Write the queued experiences in one pipeline; on a Redis error they stay queued for the next flush."""
        if not self._pending or self._client is None:
            return
        batch, self._pending = self._pending, []
        try:
            await memorybus.write(self._client, batch, now_ms())
        except RedisError as exc:
            log.warning("memory bus write of %d experiences failed, retrying next flush: %s", len(batch), exc)
            self._pending = batch + self._pending

    async def _flush_every(self) -> None:
        """Flush every interval, and once more when stopping (never cancelled mid-write, so no batch is lost)."""
        while not self._stopping.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._flush_s)
            await self.flush()

    async def _follow(self, position: str) -> None:
        """Index what the feed announces that is not indexed yet; retry on Redis errors."""
        assert self._client is not None
        while True:
            try:
                position, fed = await memorybus.follow(self._client, position, FOLLOW_BLOCK_MS)
                self._add(await memorybus.read(self._client, [item for item in fed if item.key not in self._index]))
            except RedisError as exc:
                log.warning("memory bus feed unreadable, retrying in %.0f s: %s", RETRY_S, exc)
                await asyncio.sleep(RETRY_S)

    def _add(self, stored: list[memorybus.Stored]) -> None:
        """Index experiences read from the bus."""
        for item in stored:
            self._index.add(item.key, np.asarray(item.embedding, np.float32), item.content, item.expire_at_ms)
