"""The broker's end offsets, asked on a client of the worker's own: Faust's consumer answers only between long polls."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import mode
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from faust.types import TP


class EndOffsets(mode.Service):
    """A group-less consumer that only lists end offsets; started and stopped with the app."""

    def __init__(self, bootstrap: str, client_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self._bootstrap, self._client_id = bootstrap, client_id
        self._client: AIOKafkaConsumer | None = None

    async def on_start(self) -> None:
        client = AIOKafkaConsumer(bootstrap_servers=self._bootstrap, client_id=self._client_id,
                                  enable_auto_commit=False)
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
        return await self._client.end_offsets(list(partitions))

    async def ping(self) -> None:
        """Ask the cluster for its metadata: a KafkaError (or a cancellation on timeout) unless a broker answers."""
        if self._client is None:
            raise KafkaError("the end-offsets client has not started yet")
        await self._client.topics()
