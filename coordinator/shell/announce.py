"""Coordinators announce the regions they serve on swarm.coordinators; clients read which regions are served.

A coordinator writes CoordinatorAnnounced(serving=True) when it has recovered and every ANNOUNCE_MS after, and
CoordinatorAnnounced(serving=False) when it stops cleanly. A region is served while its latest announcement says so
and is at most 3 intervals old, so a killed coordinator stops counting within about 6 s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Mapping

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from swarmlog.coordinator.announcements import Announcement, Figures, fold
from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError, SwarmlogError
from swarmlog.kafka.connection import start
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.records import CoordinatorAnnounced
from swarmlog.settings import Settings
from swarmlog.topics import COORDINATORS, spec_for

ANNOUNCE_MS = 2_000
RECENT_PER_REGION = 100  # announcements read back per region: minutes of history, far more than liveness needs
log = logging.getLogger("swarmlog.coordinator")


class Announcer:
    """Announces one region's coordinator on start, every ANNOUNCE_MS, and as stopped on a clean stop."""

    def __init__(self, settings: Settings, region: str, figures: Callable[[], Figures], wait: BrokerWait) -> None:
        self._settings, self._region, self._figures, self._wait = settings, region, figures, wait
        self._id = f"{socket.gethostname()}:{os.getpid()}"
        self._producer = EventProducer(settings, client_id=f"swarmlog-coordinator-{region}-announcer")
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect, announce at once, then keep announcing in the background."""
        await self._producer.start()
        await self._announce(serving=True)
        self._task = asyncio.create_task(self._every_interval(), name=f"announce-{self._region}")

    async def stop(self) -> None:
        """Announce that the region is no longer served, then disconnect; safe to call twice."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            await self._announce(serving=False)
        await self._producer.stop()

    async def _every_interval(self) -> None:
        while True:
            await asyncio.sleep(ANNOUNCE_MS / 1000)
            await self._announce(serving=True)

    async def _announce(self, *, serving: bool) -> None:
        """Write one announcement, telling `wait` how the broker answered; a failure is logged, never fatal (clients
        then see the region as unserved)."""
        event = stamp(
            CoordinatorAnnounced,
            producer=f"coordinator:{self._region}",
            region=self._region,
            coordinator_id=self._id,
            serving=serving,
            interval_ms=ANNOUNCE_MS,
            **self._figures(),
        )
        try:
            await self._wait.through(self._producer.send(COORDINATORS, event, key=self._region))
        except (KafkaError, SwarmlogError) as exc:
            log.warning(
                "could not announce %s on %s (%s); run `swarmlog topics ensure` if the topic is missing",
                self._region,
                COORDINATORS,
                exc,
            )


async def read_announcements(settings: Settings) -> Mapping[str, Announcement]:
    """The latest announcement of every region (none when the topic is missing); undecodable records are skipped."""
    codec = codec_for(settings.schema_registry_url)
    consumer = reader(settings, "swarmlog-regions", idempotence_supported(settings))
    await start(consumer, settings)
    try:
        if COORDINATORS not in await consumer.topics():
            return {}
        events = []
        for partition in range(spec_for(settings, COORDINATORS).partitions):
            tp = TopicPartition(COORDINATORS, partition)
            consumer.assign([tp])
            first, end = (await consumer.beginning_offsets([tp]))[tp], (await consumer.end_offsets([tp]))[tp]
            consumer.seek(tp, max(first, end - RECENT_PER_REGION * settings.regions))
            async for record in records_to_end(consumer, tp):
                with contextlib.suppress(DecodeError):
                    events.append(codec.decode_record(record.value or b"", COORDINATORS, partition, record.offset))
        return fold(events)
    finally:
        await consumer.stop()
