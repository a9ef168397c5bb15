"""The broker's end offsets, asked on a client of the worker's own: Faust's consumer answers only between long polls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import mode
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from faust.types import TP

from swarmlog.kafka.connection import client_options
from swarmlog.settings import Settings


class EndOffsets(mode.Service):
    """A group-less consumer that only lists end offsets; started and stopped with the app."""

    def __init__(self, settings: Settings, client_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._settings, self._client_id = settings, client_id
        self._client: AIOKafkaConsumer | None = None

    async def on_start(self) -> None:
        client = AIOKafkaConsumer(**client_options(self._settings), client_id=self._client_id, enable_auto_commit=False)
        await client.start()
        self._client = client

    async def on_stop(self) -> None:
        if self._client is not None:
            await self._client.stop()
            self._client = None

    async def of(self, partitions: Iterable[TP]) -> Mapping[TP, int] | None:
        """The end offset of each partition as its leader reports it now; None until the service has started."""
        if self._client is None:
            return None
        ends: dict[TP, int] = await self._client.end_offsets(list(partitions))
        return ends

    async def ping(self, topics: Iterable[str], min_insync: int) -> None:
        """Ask the cluster for its metadata and each partition of `topics` for its end offset; a KafkaError (or a
        timeout) unless every partition has a leader that answers and `min_insync` in-sync replicas, so it takes
        writes (heartbeats) now."""
        if self._client is None:
            raise KafkaError("the end-offsets client has not started yet")
        cluster = await self._client._client.fetch_all_metadata()
        for topic in topics:
            for partition in cluster._partitions.get(topic, {}).values():  # aiokafka keeps the ISR only here
                if partition.leader < 0 or len(partition.isr) < min_insync:
                    raise KafkaError(
                        f"{topic}[{partition.partition}] takes no writes now: leader "
                        f"{partition.leader}, in-sync replicas {partition.isr}, {min_insync} needed"
                    )
        # Metadata names a killed leader until the controller fences it (broker.session.timeout.ms): ask each leader.
        await self._client.end_offsets(
            [TP(topic, partition) for topic in topics for partition in cluster.partitions_for_topic(topic) or ()]
        )
