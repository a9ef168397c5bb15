"""The Redis memory projection: experiences become keys with an absolute expiry, written in batches every tick.

Records are taken in chunks of up to one tick; a chunk's writes are flushed with one pipeline of SET ... PXAT, each
announced on the memory bus feed (swarmlog/memorybus.py), before the chunk is acknowledged, so a crash repeats
writes (idempotent) and never loses one.
"""

from __future__ import annotations

import faust

from swarmlog import memorybus
from swarmlog.redis_connection import RedisAccess
from swarmlog.streams.memory import MemoryWrite, WriteBatcher, plan_write
from swarmlog.topics import EXPERIENCES

from .config import StreamsConfig
from .records import RawStream, WorkerTopics, now_ms, raw_topic

CHUNK = 1000


def install(app: faust.App, io: WorkerTopics, config: StreamsConfig) -> None:
    """Add the memory projection agent to `app` (only call it when Redis is configured)."""
    access = RedisAccess.of(config.settings)
    assert access is not None

    async def project(stream: RawStream) -> None:
        client = access.client()
        try:
            async for chunk in io.decoded_chunks(stream, CHUNK, config.tick_s):
                batcher, now = WriteBatcher(), now_ms()
                writes: list[MemoryWrite] = []
                for _, event in chunk:
                    write = plan_write(event, now)
                    if write is not None:
                        batcher, closed = batcher.add(write, event.occurred_at)
                        writes += closed
                writes += batcher.flush()[1]
                if writes:
                    await memorybus.write(client, writes, now)
        finally:
            await client.aclose()

    app.agent(raw_topic(app, EXPERIENCES), name="memory")(project)
