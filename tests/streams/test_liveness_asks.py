"""A liveness tick asks each leader for its end offsets once: the watch's ping carries the fold's mark."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from swarmlog.metrics import Sensor
from swarmlog.settings import Settings
from swarmlog.streams.app.ends import EndOffsets
from swarmlog.streams.app.liveness import ask_broker
from swarmlog.streams.app.progress import Progress
from swarmlog.streams.app.watch import Watch


class LevelFold:
    """A fold that has folded everything: it reaches any mark, and records the marks it was asked about."""

    generation = 0

    def __init__(self, assigned: list[TopicPartition]) -> None:
        self._assigned, self.asked = assigned, list[Mapping[TopicPartition, int]]()

    def settled(self) -> bool:
        return True

    def assigned(self) -> list[TopicPartition]:
        return self._assigned

    def folded_to(self, ends: Mapping[TopicPartition, int]) -> bool:
        self.asked.append(dict(ends))
        return True


@pytest.mark.kafka_only
@pytest.mark.parametrize("min_insync", [1, 2], ids=["writable", "too-few-replicas"])
async def test_a_tick_with_a_decision_due_asks_the_end_offsets_once(broker, min_insync):
    settings = dataclasses.replace(Settings.from_env(), broker=broker.kind, bootstrap=broker.bootstrap)
    heartbeats, registry = (f"test-{name}-{uuid.uuid4().hex[:8]}" for name in ("heartbeats", "registry"))
    admin = AIOKafkaAdminClient(bootstrap_servers=broker.bootstrap)
    await admin.start()
    await admin.create_topics([NewTopic(heartbeats, 2, 1), NewTopic(registry, 2, 1)])
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap)
    await producer.start()
    for _ in range(3):
        await producer.send_and_wait(heartbeats, b"beat", partition=1)
    await producer.send_and_wait(registry, b"registered", partition=0)
    ends = EndOffsets(settings, "test-end-offsets")
    await ends.start()
    try:
        assert ends._client is not None
        client: Any = ends._client._client
        requests: list[str] = []
        send = client.send

        async def counted(node_id: int, request: Any, **kwargs: Any) -> Any:
            requests.append(type(request).__name__)
            return await send(node_id, request, **kwargs)

        client.send = counted
        # Assigned: a heartbeats partition and a registry one, as a member of a two-worker group would hold.
        fold = LevelFold([TopicPartition(heartbeats, 1), TopicPartition(registry, 0)])
        watch = Watch(ends, broker.bootstrap, gap_ms=10_000, sensor=Sensor(), writable=((heartbeats,), min_insync))

        answered, folded_until = await ask_broker(watch, Progress(fold), patience_s=10, wait_s=0.1)  # type: ignore[arg-type]

        assert sum(name.startswith("OffsetRequest") for name in requests) == 1  # was two: the ping's and the mark's
        assert answered is (min_insync == 1)  # one broker cannot have two in-sync replicas: no answer counts
        # The mark is the assigned partitions' ends either way, as when the fold's progress asked on its own.
        assert fold.asked[0] == {TopicPartition(heartbeats, 1): 3, TopicPartition(registry, 0): 1}
        assert folded_until is not None

        requests.clear()
        answered, folded_until = await ask_broker(watch, None, patience_s=10, wait_s=0.1)  # no decision due
        assert sum(name.startswith("OffsetRequest") for name in requests) == 1 and folded_until is None
    finally:
        await ends.stop()
        await producer.stop()
        await admin.delete_topics([heartbeats, registry])
        await admin.close()


async def test_the_first_tick_after_a_rebalance_still_decides():
    # The worker's start is a rebalance to a Progress built before it: the first tick with a death due used to
    # lose its mark to it, declaring every death a tick (0.5 s) late.
    fold = LevelFold([TopicPartition("heartbeats", 0)])
    progress = Progress(fold)  # type: ignore[arg-type]
    fold.generation = 1

    asking = progress.to_ask()

    assert asking == [TopicPartition("heartbeats", 0)]
    assert await progress.folded_until(1_000, {asking[0]: 5}, wait_s=0.1) == 1_000
