"""The broker's end offsets, asked on a client of the worker's own: Faust's consumer answers only between long polls."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

import mode
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from faust.types import TP

from swarmlog.kafka.connection import client_options
from swarmlog.settings import Settings

from .records import now_ms


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

    async def ping(self, topics: Iterable[str], min_insync: int, patience_s: float, also: Iterable[TP] = ()) -> Ping:
        """Ask the cluster for its metadata, then each partition of `topics` and of `also` for its end offset, in
        one ListOffsets request per leader. Raises a KafkaError (or a TimeoutError past `patience_s`) when the metadata
        cannot be had; otherwise the answer says whether every partition of `topics` has a leader that answers and `min_insync`
        in-sync replicas, so it takes writes (heartbeats) now, and holds the end offsets of the partitions whose leader
        answered.

        The watch (are the heartbeats writable?) and the marks of the fold's progress (`also`: its assigned partitions)
        are answered by the same requests, so a tick asks each leader once; each judges only the leaders of its own
        partitions, as when each asked on its own."""
        if self._client is None:
            raise KafkaError("the end-offsets client has not started yet")
        deadline = asyncio.get_running_loop().time() + patience_s
        async with asyncio.timeout_at(deadline):
            cluster = await self._client._client.fetch_all_metadata()
        unwritable: Exception | None = None
        for topic in topics:
            for partition in cluster._partitions.get(topic, {}).values():  # aiokafka keeps the ISR only here
                if unwritable is None and (partition.leader < 0 or len(partition.isr) < min_insync):
                    unwritable = KafkaError(
                        f"{topic}[{partition.partition}] takes no writes now: leader "
                        f"{partition.leader}, in-sync replicas {partition.isr}, {min_insync} needed"
                    )
        # Metadata names a killed leader until the controller fences it (broker.session.timeout.ms): ask each leader.
        watched = {TP(topic, partition) for topic in topics for partition in cluster.partitions_for_topic(topic) or ()}
        by_leader: dict[int, list[TP]] = {}
        for tp in watched | set(also):
            leader = cluster.leader_for_partition(tp)
            if leader is not None and leader >= 0:  # else unwritable above, or a mark missing this tick
                by_leader.setdefault(leader, []).append(tp)
        client, asked_ms = self._client, now_ms()

        async def ask(tps: list[TP]) -> Mapping[TP, int]:
            async with asyncio.timeout_at(deadline):  # one leader that does not answer keeps none of the others'
                answer: dict[TP, int] = await client.end_offsets(tps)
                return answer

        answers = await asyncio.gather(*map(ask, by_leader.values()), return_exceptions=True)
        ends: dict[TP, int] = {}
        for tps, answer in zip(by_leader.values(), answers, strict=True):
            if isinstance(answer, BaseException):
                if not isinstance(answer, KafkaError | TimeoutError):
                    raise answer
                if unwritable is None and watched.intersection(tps):
                    unwritable = answer
            else:
                ends.update(answer)
        return Ping(asked_ms, ends, unwritable)


@dataclasses.dataclass(frozen=True)
class Ping:
    """One ping's answer: when the end offsets were asked, those the leaders gave, and why the watched topics take no
    writes now (None: they do)."""

    asked_ms: int
    ends: Mapping[TP, int]
    unwritable: Exception | None

    def ends_of(self, partitions: Iterable[TP]) -> Mapping[TP, int] | None:
        """The end offsets of `partitions`; None unless every one's leader answered."""
        wanted = list(partitions)
        if not all(tp in self.ends for tp in wanted):
            return None
        return {tp: self.ends[tp] for tp in wanted}
