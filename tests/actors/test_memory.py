"""Semantic memory: the index finds the nearest live memories; the Redis bus honours TTL, batches, and crosses nodes."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import uuid
from urllib.parse import urlsplit

import numpy as np
import pytest
import redis
from agent_harness import Log, send_inbox, task_assigned
from experiences import recorded

from swarmlog import memorybus, topics
from swarmlog.actors.brains.scripted import ScriptedBrain
from swarmlog.actors.memory.embeddings import MiniLM
from swarmlog.actors.memory.index import VectorIndex
from swarmlog.actors.memory.semantic import SemanticMemory
from swarmlog.actors.shell.agent import AgentProcess
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.envelope import now_ms
from swarmlog.kafka.producer import EventProducer
from swarmlog.redis_connection import RedisAccess
from swarmlog.replay.memory import rebuild_memory
from swarmlog.schemas.records import AgentRegistered, ExperienceRecorded, TaskCompleted

# Distinct topics; each query must bring back its own experience first.
EXPERIENCES = {
    "kafka": "Kafka consumers in one group split the partitions of a topic between them.",
    "redis": "Redis keys set with PXAT expire at an absolute Unix time in milliseconds.",
    "python": "A Python list comprehension builds a new list from an iterable in one expression.",
    "cooking": "Bake the bread at 220 degrees for thirty minutes until the crust is golden.",
    "football": "The striker scored twice in the second half and the team won the league.",
    "astronomy": "Jupiter is the largest planet of the solar system and has dozens of moons.",
    "medicine": "Antibiotics treat bacterial infections but do nothing against viruses.",
    "finance": "The central bank raised interest rates to slow down inflation.",
    "music": "The orchestra tuned to the oboe's A before playing the symphony.",
    "gardening": "Tomato plants need full sun, deep watering and a stake to climb.",
}
QUERIES = {
    "kafka": "how are topic partitions shared among consumers of a group?",
    "redis": "when does a key with an absolute expiry time disappear?",
    "python": "syntax to create a list from another sequence",
    "cooking": "what oven temperature for baking a loaf?",
    "football": "who won the match and how many goals?",
    "astronomy": "which planet is the biggest?",
    "medicine": "can I take penicillin for the flu?",
    "finance": "why did borrowing costs go up?",
    "music": "how does an orchestra get in tune?",
    "gardening": "how to grow tomatoes",
}


@pytest.fixture(scope="module")
def model() -> MiniLM:
    return MiniLM()


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, np.float32)
    return vector / np.linalg.norm(vector)


async def eventually_async(check, timeout_s: float = 10.0):
    """Await `check` until it returns something truthy, or fail at the deadline."""
    deadline = time.monotonic() + timeout_s
    while not (result := await check()):
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.05)
    return result


def test_the_index_returns_the_nearest_first_and_at_most_k():
    index = VectorIndex(3, capacity=1)
    for key, vector in {"x": unit(1, 0, 0), "xy": unit(1, 1, 0), "y": unit(0, 1, 0), "z": unit(0, 0, 1)}.items():
        index.add(key, vector, key, expire_at_ms=10**13)
    hits = index.search(unit(1, 0.2, 0), k=2, now_ms=0)
    assert [hit.key for hit in hits] == ["x", "xy"]
    assert hits[0].score > hits[1].score
    assert next(hit.key for hit in index.search(unit(0, 0, 1), k=10, now_ms=0)) == "z"
    assert len(index.search(unit(0, 0, 1), k=10, now_ms=0)) == 4


def test_the_index_never_returns_an_expired_memory_and_evicts_them():
    index = VectorIndex(2)
    index.add("old", unit(1, 0), "old", expire_at_ms=1_000)
    index.add("new", unit(0.9, 0.1), "new", expire_at_ms=5_000)
    assert [hit.key for hit in index.search(unit(1, 0), k=2, now_ms=999)] == ["old", "new"]
    assert [hit.key for hit in index.search(unit(1, 0), k=2, now_ms=1_000)] == ["new"]
    assert len(index) == 1 and "old" not in index
    assert index.search(unit(1, 0), k=2, now_ms=5_000) == []


def test_adding_a_known_key_replaces_it():
    index = VectorIndex(2)
    index.add("a", unit(1, 0), "first", expire_at_ms=10**13)
    index.add("a", unit(0, 1), "second", expire_at_ms=10**13)
    assert len(index) == 1
    assert index.search(unit(0, 1), k=1, now_ms=0)[0].content == "second"


async def test_recall_brings_back_the_relevant_experience_first(model):
    async with SemanticMemory(None, model=model) as memory:
        for topic, content in EXPERIENCES.items():
            memory.remember(recorded(model, content, experience_id=topic))
        assert len(memory) == len(EXPERIENCES)
        for topic, query in QUERIES.items():
            hits = await memory.recall(query, k=3)
            assert hits[0].key == f"experience:{topic}", (query, hits)


async def test_an_experience_expires_on_redis_at_its_own_time_and_leaves_recall(model, redis_url):
    content = f"the deploy window closes at midnight {uuid.uuid4().hex}"
    # Recorded 3592 s ago with a one-hour TTL: 8 s left (room for a loaded machine), on Redis and in the index alike.
    experience = recorded(model, content, at_ms=now_ms() - 3_592_000)
    key = f"experience:{experience.experience_id}"
    store = redis.Redis.from_url(redis_url)
    async with SemanticMemory(RedisAccess(redis_url), flush_ms=50, model=model) as memory:
        memory.remember(experience)
        assert [hit.content for hit in await memory.recall(content, k=1)] == [content]
        await eventually_async(lambda: asyncio.to_thread(store.exists, key))
        assert store.pexpiretime(key) == experience.occurred_at + 3_600_000
        await eventually_async(lambda: asyncio.to_thread(lambda: not store.exists(key)))
        assert content not in [hit.content for hit in await memory.recall(content, k=3)]


async def test_an_already_expired_experience_is_neither_indexed_nor_written(model, redis_url):
    experience = recorded(model, "stale news", ttl_s=1, at_ms=now_ms() - 10_000)
    async with SemanticMemory(RedisAccess(redis_url), flush_ms=50, model=model) as memory:
        memory.remember(experience)
        assert "stale news" not in [hit.content for hit in await memory.recall("stale news", k=3)]
        await memory.flush()
    assert redis.Redis.from_url(redis_url).get(f"experience:{experience.experience_id}") is None


async def test_writes_of_one_interval_reach_redis_in_one_pipeline(model, redis_url, monkeypatch):
    batches = []
    write = memorybus.write

    async def counted(client, writes, at_ms):
        batches.append(len(writes))
        await write(client, writes, at_ms)

    monkeypatch.setattr(memorybus, "write", counted)
    experiences = [recorded(model, f"note {index} {uuid.uuid4().hex}") for index in range(5)]
    store = redis.Redis.from_url(redis_url)
    async with SemanticMemory(RedisAccess(redis_url), flush_ms=200, model=model) as memory:
        for experience in experiences:
            memory.remember(experience)
        await eventually_async(
            lambda: asyncio.to_thread(lambda: all(store.exists(f"experience:{e.experience_id}") for e in experiences))
        )
    assert batches == [5]


async def test_nothing_is_written_before_the_interval_ends_and_stopping_flushes(model, redis_url):
    experience = recorded(model, f"flushed on stop {uuid.uuid4().hex}")
    key = f"experience:{experience.experience_id}"
    store = redis.Redis.from_url(redis_url)
    async with SemanticMemory(RedisAccess(redis_url), flush_ms=3_600_000, model=model) as memory:
        memory.remember(experience)
        await asyncio.sleep(0.3)
        assert store.get(key) is None
    assert store.get(key) is not None


async def test_an_agent_recalls_what_another_node_remembered(model, redis_url):
    content = f"the staging database password rotates every Monday {uuid.uuid4().hex}"
    async with (
        SemanticMemory(RedisAccess(redis_url), flush_ms=50, model=model) as reader,
        SemanticMemory(RedisAccess(redis_url), flush_ms=50, model=model) as writer,
    ):
        writer.remember(recorded(model, content))

        async def recalled():
            return [hit.content for hit in await reader.recall(content, k=1)] == [content]

        await eventually_async(recalled)
    async with SemanticMemory(RedisAccess(redis_url), model=model) as late:
        assert [hit.content for hit in await late.recall(content, k=1)] == [content]


async def test_a_wiped_bus_is_rebuilt_from_the_log_and_recalled_again(model, settings):
    content = f"the canary release goes to one percent first {uuid.uuid4().hex}"
    alive, expired = recorded(model, content), recorded(model, "long gone", ttl_s=1, at_ms=now_ms() - 60_000)
    async with EventProducer(settings, client_id="test-memory") as producer:
        for experience in (alive, expired):
            await producer.send(topics.EXPERIENCES, experience, key=experience.agent_id)
    store = redis.Redis.from_url(settings.redis_url)
    store.delete(*(f"experience:{e.experience_id}" for e in (alive, expired)))

    rebuilt = await rebuild_memory(settings, now_ms())

    assert rebuilt.written >= 1 and rebuilt.expired >= 1 and not rebuilt.problems
    assert store.get(f"experience:{expired.experience_id}") is None
    async with SemanticMemory(RedisAccess.of(settings), model=model) as memory:
        assert [hit.content for hit in await memory.recall(content, k=1)] == [content]


class PromptRecorder(ScriptedBrain):
    """The scripted brain, keeping every prompt it was given."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.prompts: list[str] = []

    async def generate(self, prompt, json_schema, max_tokens):
        self.prompts.append(prompt)
        return await super().generate(prompt, json_schema, max_tokens)


async def test_an_agent_remembers_on_the_log_and_redis_and_recalls_into_its_next_prompt(settings, tmp_path):
    # A memory bus of its own (a Redis database per broker kind): the other broker's run of this test stores a
    # near-identical fact in the shared one, which could rank first and hide this run's.
    database = {"kafka": 1, "tansu": 2}.get(settings.broker, 3)
    settings = dataclasses.replace(
        settings, redis_url=urlsplit(settings.redis_url)._replace(path=f"/{database}").geturl()
    )
    agent_id, slot, fact = f"mem-{uuid.uuid4().hex[:8]}", 57, f"the build cache lives on node seven {uuid.uuid4().hex}"
    brain = PromptRecorder(
        script=[
            json.dumps({"action": "remember", "content": fact, "confidence": 1}),
            json.dumps({"action": "answer", "content": "done", "confidence": 1}),
        ]
    )
    config = AgentConfig(
        agent_id=agent_id,
        capabilities=("coding",),
        brain="scripted",
        model=None,
        gpu=None,
        node="n7",
        region="region-0",
        slot=slot,
        data_dir=tmp_path,
    )
    agent = AgentProcess(config, settings, brain)
    running = asyncio.create_task(agent.run())
    try:
        async with Log(settings, topics.EXPERIENCES, topics.TASK_EVENTS, topics.REGISTRY) as log:
            await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id))
            await send_inbox(settings, slot, task_assigned(agent_id, slot, "where is the build cache?", task_id="t1"))
            await log.wait_for(lambda: log.named(TaskCompleted, agent_id=agent_id, task_id="t1"))
            (recorded_event,) = log.named(ExperienceRecorded, agent_id=agent_id)
            assert recorded_event.content == fact and len(recorded_event.embedding) == 384
            store = redis.Redis.from_url(settings.redis_url)
            key = f"experience:{recorded_event.experience_id}"
            await eventually_async(lambda: asyncio.to_thread(store.get, key))
            await send_inbox(
                settings, slot, task_assigned(agent_id, slot, "which node has the build cache?", task_id="t2")
            )
            await log.wait_for(lambda: log.named(TaskCompleted, agent_id=agent_id, task_id="t2"))
        assert f"Recalled memories:\n- {fact}" in brain.prompts[-1]
    finally:
        agent.stop()
        await asyncio.wait_for(running, 30)
