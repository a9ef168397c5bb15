"""MissionClient: submit missions and follow them through the coordinator journal, from Python."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from aiokafka import TopicPartition

from swarmlog.coordinator.placement import owner
from swarmlog.coordinator.shell.recovery import JOURNAL, reader
from swarmlog.envelope import stamp
from swarmlog.errors import SwarmlogError
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings

MISSIONS = "swarm.missions"
TERMINAL = frozenset({"MissionCompleted", "MissionFailed", "MissionRejected"})


class MissionTimeout(SwarmlogError):
    """A mission did not end within the time the caller gave it."""

    retriable = True


class MissionClient:
    """Submits MissionSubmitted events and reads a mission's decisions from its region's journal partition."""

    def __init__(self, settings: Settings, *, client_name: str = "python") -> None:
        self._settings = settings
        self._producer_name = f"client:{client_name}"
        self._codec = codec_for(settings.schema_registry_url)

    def region_of(self, mission_id: str, region: str | None = None) -> str:
        """The region that runs the mission: the one it names, else the coordinators' placement."""
        return region or owner(mission_id, self._settings.region_names)

    async def submit(self, mission: Mapping[str, Any]) -> str:
        """Produce a MissionSubmitted (validated against its schema first) and return the mission id."""
        fields = {"mission_id": uuid.uuid4().hex[:12], "region": None, "submitted_by": self._producer_name} | dict(mission)
        event = stamp("MissionSubmitted", producer=self._producer_name, correlation_id=fields["mission_id"], **fields)
        async with EventProducer(self._settings, client_id="swarmlog-client") as producer:
            await producer.send(MISSIONS, event, key=fields["mission_id"])
        return fields["mission_id"]

    async def follow(self, mission_id: str, region: str | None = None) -> AsyncIterator[Event]:
        """The mission's journal events from the start, live, ending with its terminal event."""
        tp = TopicPartition(JOURNAL, self._settings.region_names.index(self.region_of(mission_id, region)))
        consumer = reader(self._settings, "swarmlog-client", idempotence_supported(self._settings))
        await consumer.start()
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while True:
                for record in (await consumer.getmany(tp, timeout_ms=200)).get(tp, []):
                    event = self._codec.decode_record(record.value, tp.topic, tp.partition, record.offset)
                    if event.data.get("mission_id") == mission_id:
                        yield event
                        if event.name in TERMINAL:
                            return
        finally:
            await consumer.stop()

    async def wait(self, mission_id: str, region: str | None = None, timeout_s: float = 300.0) -> Event:
        """The mission's terminal event, or MissionTimeout after `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                async for event in self.follow(mission_id, region):
                    if event.name in TERMINAL:
                        return event
        except TimeoutError:
            pass
        raise MissionTimeout(f"mission {mission_id} did not end within {timeout_s:.0f} s; `swarmlog watch` follows it")
