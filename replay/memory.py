"""Rebuild the Redis memory bus from the log: every experience of swarm.memory.experiences that has not expired."""

from __future__ import annotations

import dataclasses

from redis.exceptions import RedisError

from swarmlog import memorybus, topics
from swarmlog.errors import ConfigError
from swarmlog.redis_connection import RedisAccess
from swarmlog.replay.fold import Problem, decoded
from swarmlog.replay.source import read
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings
from swarmlog.streams.memory import plan_write


@dataclasses.dataclass(frozen=True, slots=True)
class Rebuilt:
    """How many experiences went back on the bus, how many had expired, and the records that did not decode."""

    written: int
    expired: int
    problems: tuple[Problem, ...]


async def rebuild_memory(settings: Settings, now_ms: int) -> Rebuilt:
    """Write every experience still alive at `now_ms` back to the bus, in pipelines of memorybus.CHUNK keys."""
    access = RedisAccess.of(settings)
    if access is None:
        raise ConfigError("rebuilding the memory bus needs SWARMLOG_REDIS_URL")
    reading = await read(settings, [topics.EXPERIENCES])
    events = list(decoded(reading.records, codec_for(settings.schema_registry_url)))
    writes = [write for _, item in events if isinstance(item, Event) and (write := plan_write(item, now_ms))]
    problems = tuple(item for _, item in events if isinstance(item, Problem))
    client = access.client()
    try:
        for start in range(0, len(writes), memorybus.CHUNK):
            await memorybus.write(client, writes[start : start + memorybus.CHUNK], now_ms)
    except RedisError as exc:
        raise access.failure(exc) from exc
    finally:
        await client.aclose()
    return Rebuilt(len(writes), len(events) - len(problems) - len(writes), problems)
