"""The Redis memory bus that agents and the streams projection share: experience keys that expire, and a feed.

`experience:<id>` holds the JSON value of `streams.memory.plan_write` and expires at its absolute time (SET ... PXAT).
Each write batch also appends every key it wrote to the stream `experience-feed` (trimmed to the last hour), so a
reader learns of other nodes' experiences by reading the feed after its position instead of scanning the keys; it
scans once, when it starts, after noting the feed's end (a key both scanned and fed is simply seen twice).

ACL_RULES are all a Redis ACL user needs for it, the agents' reads and the streams worker's writes alike: the commands
below (PING for probes, SELECT for a URL's database) on the experience keys and the feed, nothing else.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Sequence
from typing import TypeAlias, cast

import redis.asyncio as aioredis

from swarmlog.streams.memory import MemoryWrite

FEED = "experience-feed"
KEY_PATTERN = "experience:*"
FEED_RETENTION_MS = 3_600_000
CHUNK = 1000
ACL_RULES = (
    f"resetkeys ~{KEY_PATTERN} ~{FEED} resetchannels -@all "
    "+ping +select +get +mget +set +pexpiretime +scan +xadd +xread +xrevrange"
)
FeedEntry: TypeAlias = tuple[bytes | str, dict[bytes | str, bytes | str]]
"""A feed entry as our clients' replies hold it (RESP2, whose types redis-py unions with RESP3's): id and fields."""


@dataclasses.dataclass(frozen=True, slots=True)
class Fed:
    """A key the feed announced, and when it expires."""

    key: str
    expire_at_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class Stored:
    """An experience on the bus: its key, text, embedding and expiry."""

    key: str
    content: str
    embedding: list[float]
    expire_at_ms: int


async def write(client: aioredis.Redis, writes: Sequence[MemoryWrite], now_ms: int) -> None:
    """One pipeline: SET each key PXAT its expiry and announce it on the feed, trimming entries past retention."""
    async with client.pipeline(transaction=False) as pipe:
        for item in writes:
            pipe.set(item.key, item.value, pxat=item.expire_at_ms)
            pipe.xadd(
                FEED,
                {"key": item.key, "expire_at": item.expire_at_ms},
                minid=now_ms - FEED_RETENTION_MS,
                approximate=True,
            )
        await pipe.execute()


async def feed_end(client: aioredis.Redis) -> str:
    """The id of the feed's last entry ("0-0" while it is empty); following from it sees only later writes."""
    last = cast(list[FeedEntry], await client.xrevrange(FEED, count=1))
    return _text(last[0][0]) if last else "0-0"


async def follow(client: aioredis.Redis, after: str, block_ms: int) -> tuple[str, list[Fed]]:
    """The keys announced after feed entry `after` (waiting up to block_ms for one) and the new position."""
    reply = cast(list[tuple[bytes, list[FeedEntry]]], await client.xread({FEED: after}, count=CHUNK, block=block_ms))
    entries = [entry for _, stream_entries in reply for entry in stream_entries]
    if not entries:
        return after, []
    fed = [Fed(_text(fields[b"key"]), int(fields[b"expire_at"])) for _, fields in entries]
    return _text(entries[-1][0]), fed


async def read(client: aioredis.Redis, fed: Sequence[Fed]) -> list[Stored]:
    """The experiences behind announced keys; keys already expired are left out."""
    values = await client.mget([item.key for item in fed]) if fed else []
    return [
        _stored(item.key, value, item.expire_at_ms)
        for item, value in zip(fed, values, strict=True)
        if value is not None
    ]


async def scan(client: aioredis.Redis) -> AsyncIterator[list[Stored]]:
    """Every experience on the bus, in chunks of one pipeline each (keys expiring meanwhile are left out)."""
    keys: list[str] = []
    async for key in client.scan_iter(match=KEY_PATTERN, count=CHUNK):
        keys.append(_text(key))
        if len(keys) == CHUNK:
            yield await _fetch(client, keys)
            keys = []
    if keys:
        yield await _fetch(client, keys)


async def _fetch(client: aioredis.Redis, keys: list[str]) -> list[Stored]:
    """The values and expiries of keys, in one pipeline."""
    async with client.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.get(key)
            pipe.pexpiretime(key)
        replies = await pipe.execute()
    return [
        _stored(key, value, expire_at)
        for key, value, expire_at in zip(keys, replies[::2], replies[1::2], strict=True)
        if value is not None and expire_at > 0
    ]


def _stored(key: str, value: bytes | str, expire_at_ms: int) -> Stored:
    """An experience from its JSON value."""
    record = json.loads(value)
    return Stored(key, record["content"], record["embedding"], expire_at_ms)


def _text(value: bytes | str) -> str:
    """A Redis reply as text."""
    return value.decode() if isinstance(value, bytes) else value
