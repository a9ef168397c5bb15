"""Coordinators announce the regions they serve on swarm.coordinators; clients read which regions are served.

A coordinator writes CoordinatorAnnounced(serving=True) when it has recovered and every ANNOUNCE_MS after, and
CoordinatorAnnounced(serving=False) when it stops cleanly. A region is served while its latest announcement says so
and is at most 3 intervals old, so a killed coordinator stops counting within about 6 s. Nothing else fencing a second
live coordinator of a region, one does not start beside another: it waits while the region's latest announcement is
another's that may still be alive (`wait_until_unserved`), and of two that found the region unserved at once, the one
whose first announcement the log holds first serves it (`hold_claim`); the other exits before it decides anything.
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

from swarmlog.coordinator.announcements import Announcement, Figures, first_claim, fold, rival
from swarmlog.envelope import now_ms, stamp
from swarmlog.errors import ConfigError, DecodeError, SwarmlogError
from swarmlog.kafka.connection import start
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.kafka.waiting import BrokerWait
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import CoordinatorAnnounced
from swarmlog.settings import Settings
from swarmlog.topics import COORDINATORS, spec_for

ANNOUNCE_MS = 2_000
RECENT_PER_REGION = 100  # announcements read back per region: minutes of history, far more than liveness needs
RIVAL_POLL_S = 0.5
log = logging.getLogger("swarmlog.coordinator")


class Announcer:
    """Announces one region's coordinator on start, every ANNOUNCE_MS, and as stopped on a clean stop."""

    def __init__(self, settings: Settings, region: str, figures: Callable[[], Figures], wait: BrokerWait) -> None:
        self._settings, self._region, self._figures, self._wait = settings, region, figures, wait
        self._id = coordinator_id()
        self._producer = EventProducer(settings, client_id=f"swarmlog-coordinator-{region}-announcer")
        self._task: asyncio.Task[None] | None = None

    async def start(self, read_to: Mapping[int, int]) -> None:
        """Connect, announce at once, then keep announcing in the background; raise ConfigError, announcing nothing
        more, when another coordinator claimed the region first since `read_to` (see `hold_claim`)."""
        await self._producer.start()
        try:
            await self._announce(serving=True)
            await hold_claim(self._settings, self._region, read_to)
        except BaseException:
            await self._producer.stop()
            raise
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


def coordinator_id() -> str:
    """How this process's coordinators sign their announcements: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def gone(announcer: str) -> bool:
    """Whether the coordinator of that id ran on this host and its process is gone (killed: it announced no stop)."""
    host, _, pid = announcer.rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


async def wait_until_unserved(settings: Settings, region: str) -> Mapping[int, int]:
    """Return once no other live coordinator serves `region`, with the offsets (per partition of swarm.coordinators)
    up to which the announcements were read; raise ConfigError while one does.

    At once when its latest announcement is a stop, is older than the intervals it may miss, is this process's own,
    or names a process of this host that is gone (a coordinator killed and started again). Otherwise the one that
    announced may have died elsewhere: wait until its announcement expires (at most 3 intervals, about 6 s), and
    refuse as soon as it announces again, since then it is alive."""
    own, first = coordinator_id(), None
    while True:
        events, read_to = await _announced(settings)
        other = rival(fold(events), region, own, now_ms())
        if other is None or gone(other.coordinator_id):
            return read_to
        if first is None:
            first = other
            log.warning(
                "region %s was announced as served by %s %.1f s ago; waiting up to %.1f s for it to go silent "
                "(a coordinator killed moments ago) before this one starts",
                region,
                other.coordinator_id,
                (now_ms() - other.at_ms) / 1000,
                (other.silent_from_ms - now_ms()) / 1000,
            )
        elif (other.coordinator_id, other.at_ms) != (first.coordinator_id, first.at_ms):
            raise _served_by(region, other.coordinator_id, f"it announced {(now_ms() - other.at_ms) / 1000:.1f} s ago")
        await asyncio.sleep(RIVAL_POLL_S)


async def hold_claim(settings: Settings, region: str, read_to: Mapping[int, int]) -> None:
    """Raise ConfigError unless this process's announcement is the first that claims `region` since `read_to`
    (`wait_until_unserved`'s answer): of two coordinators that each found the region unserved, the one whose
    announcement the log holds first serves it, and the other stops before it decides anything."""
    events, _ = await _announced(settings, read_to)
    first = first_claim(events, region)
    if first is not None and first != coordinator_id():
        raise _served_by(region, first, "it announced first, as this one started")


def _served_by(region: str, other: str, when: str) -> ConfigError:
    return ConfigError(
        f"region {region} is served by the coordinator {other} ({when}): two coordinators of one region would both "
        "route its tasks, and nothing fences the second; stop that one first (SIGTERM), or start this one for another "
        "region (--region)"
    )


async def read_announcements(settings: Settings) -> Mapping[str, Announcement]:
    """The latest announcement of every region (none when the topic is missing); undecodable records are skipped."""
    events, _ = await _announced(settings)
    return fold(events)


async def _announced(settings: Settings, since: Mapping[int, int] | None = None) -> tuple[list[Event], dict[int, int]]:
    """The announcements from `since` (offsets per partition; None: the recent ones) to the end, each partition's in
    log order, and the offsets read to; undecodable records are skipped, a missing topic holds none."""
    codec = codec_for(settings.schema_registry_url)
    consumer = reader(settings, "swarmlog-regions", idempotence_supported(settings))
    await start(consumer, settings)
    try:
        if COORDINATORS not in await consumer.topics():
            return [], {}
        events, read_to = list[Event](), dict[int, int]()
        for partition in range(spec_for(settings, COORDINATORS).partitions):
            tp = TopicPartition(COORDINATORS, partition)
            consumer.assign([tp])
            first, end = (await consumer.beginning_offsets([tp]))[tp], (await consumer.end_offsets([tp]))[tp]
            recent = end - RECENT_PER_REGION * settings.regions
            consumer.seek(tp, max(first, recent if since is None else since.get(partition, first)))
            async for record in records_to_end(consumer, tp):
                with contextlib.suppress(DecodeError):
                    events.append(codec.decode_record(record.value or b"", COORDINATORS, partition, record.offset))
            read_to[partition] = await consumer.position(tp)
        return events, read_to
    finally:
        await consumer.stop()
