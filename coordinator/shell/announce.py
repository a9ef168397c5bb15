"""Coordinators announce the regions they serve on swarm.coordinators; clients read which regions are served.

A coordinator writes CoordinatorAnnounced(serving=True) when it has recovered and every ANNOUNCE_MS after, and
CoordinatorAnnounced(serving=False) when it stops cleanly. A region is served while its latest announcement says so
and is at most 3 intervals old, so a killed coordinator stops counting within about 6 s. Nothing else fences a second
live coordinator of a region, so the announcements do, by the fold every reader agrees on (`announcements.evolve`):
- one does not start beside another: it waits while the region's latest word is another's that may still be alive
  (`wait_until_unserved`), then announces and reads the log back; of two that found the region unserved at once, the
  one whose word the log holds first holds it, and the other exits before it decides anything;
- a holder decides only within its lease (2 intervals after its latest word known to hold the region). A word whose
  answer came within the lease renews it; past it (the process was paused, the broker slow) it announces and reads the
  log back before its next write, and stops when another took the region over meanwhile (`Announcer.hold`).
A pause between that check and the write itself is the one window left: a broker-side fence would need the journal
written in transactions (DESIGN §12).
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

from swarmlog.coordinator.announcements import Announcement, Figures, fold, holds, rival
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
    """Holds one region for its coordinator: claims it on start, announces it every ANNOUNCE_MS, checks before each
    write that it still holds it (`hold`), and announces it as stopped on a clean stop."""

    def __init__(
        self, settings: Settings, region: str, figures: Callable[[], Figures], wait: BrokerWait, *, producer: str = ""
    ) -> None:
        self._settings, self._region, self._figures, self._wait = settings, region, figures, wait
        self._producer_name = producer or f"coordinator:{region}"
        self._id = coordinator_id()
        self._producer = EventProducer(settings, client_id=f"swarmlog-coordinator-{region}-announcer")
        self._task: asyncio.Task[None] | None = None
        self._held: Announcement | None = None  # this coordinator's latest word known to hold the region
        self._deposed: ConfigError | None = None
        self._claiming = asyncio.Lock()

    async def start(self, gone: str | None = None) -> None:
        """Connect and claim the region, then keep announcing in the background; raise ConfigError, announcing nothing
        more, when another coordinator holds it by the log. `gone`: the coordinator that held it and is known to be
        dead (`wait_until_unserved`), whose stop this writes first, so that every reader's fold lets the claim count."""
        await self._producer.start()
        try:
            if gone is not None:
                await self._announce(serving=False, coordinator_id=gone)
            await self._claim()
        except BaseException:
            await self._producer.stop()
            raise
        self._task = asyncio.create_task(self._every_interval(), name=f"announce-{self._region}")

    async def stop(self) -> None:
        """Announce that the region is no longer served (unless another took it over), then disconnect; safe to call
        twice."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
            if self._deposed is None:
                await self._announce(serving=False)
        await self._producer.stop()

    async def hold(self) -> None:
        """Return while this coordinator holds its region: at once within its lease, else once it has announced and
        read back that it still does; raise ConfigError when another coordinator took the region over."""
        self.check()
        if self._held is None or now_ms() >= self._held.lease_until_ms:
            await self._claim()

    def check(self) -> None:
        """Raise ConfigError when this coordinator found that another holds its region."""
        if self._deposed is not None:
            raise self._deposed

    async def _every_interval(self) -> None:
        """Renew the lease with each word answered within it; past it, claim the region again (and end if deposed)."""
        while True:
            await asyncio.sleep(ANNOUNCE_MS / 1000)
            held = self._held
            if held is not None and now_ms() < held.lease_until_ms:
                word = await self._announce(serving=True)
                if word is not None and now_ms() < held.lease_until_ms:  # no rival's word can precede it in the log
                    self._held = word
                continue
            with contextlib.suppress(ConfigError):  # deposed: `check` tells the service
                await self._claim()
            if self._deposed is not None:
                return

    async def _claim(self) -> None:
        """Announce, then read the region's announcements back: this word holds the lease when the region is this
        coordinator's by them; else raise ConfigError (and keep raising it) before anything more is decided."""
        async with self._claiming:
            self.check()
            if self._held is not None and now_ms() < self._held.lease_until_ms:
                return  # claimed while this waited
            if self._held is not None:
                log.warning(
                    "%s: no word of this coordinator was answered for %.1f s (paused, or a slow broker); reading the "
                    "announcements before the next write, in case another took the region over",
                    self._region,
                    (now_ms() - self._held.at_ms) / 1000,
                )
            while (word := await self._announce(serving=True)) is None:
                await asyncio.sleep(ANNOUNCE_MS / 1000)  # no word on the log, no lease: the broker is away
            latest = fold(await _announced(self._settings))
            if not holds(latest, self._region, self._id):
                holder = latest.get(self._region)
                other = holder.coordinator_id if holder is not None else "unknown"
                self._deposed = _served_by(self._region, other, "it holds the region by the announcements' log")
                log.error("%s", self._deposed)
                raise self._deposed
            self._held = word

    async def _announce(self, *, serving: bool, coordinator_id: str | None = None) -> Announcement | None:
        """Write one announcement, telling `wait` how the broker answered: what it says, once the broker has it; None
        when it failed, which is logged, never fatal (clients then see the region as unserved). `coordinator_id`: whose
        word it is (a dead one's stop); this coordinator's by default."""
        event = stamp(
            CoordinatorAnnounced,
            producer=self._producer_name,
            region=self._region,
            coordinator_id=coordinator_id or self._id,
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
            return None
        return fold([event])[self._region]


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


async def wait_until_unserved(settings: Settings, region: str) -> str | None:
    """Return once no other live coordinator serves `region`: the id of the one that held it when its process is known
    to be gone, else None; raise ConfigError while one serves it.

    At once when its latest announcement is a stop, is older than the intervals it may miss, is this process's own,
    or names a process of this host that is gone (a coordinator killed and started again). Otherwise the one that
    announced may have died elsewhere: wait until its announcement expires (at most 3 intervals, about 6 s), and
    refuse as soon as it announces again, since then it is alive."""
    own, first = coordinator_id(), None
    while True:
        other = rival(fold(await _announced(settings)), region, own, now_ms())
        if other is None:
            return None
        if gone(other.coordinator_id):
            return other.coordinator_id
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


def _served_by(region: str, other: str, when: str) -> ConfigError:
    return ConfigError(
        f"region {region} is served by the coordinator {other} ({when}): two coordinators of one region would both "
        "route its tasks; stop that one first (SIGTERM), or start this one for another region"
    )


async def read_announcements(settings: Settings) -> Mapping[str, Announcement]:
    """The latest announcement of every region (none when the topic is missing); undecodable records are skipped."""
    return fold(await _announced(settings))


async def _announced(settings: Settings) -> list[Event]:
    """The recent announcements, each partition's in log order; undecodable records are skipped, a missing topic holds
    none."""
    codec = codec_for(settings.schema_registry_url)
    consumer = reader(settings, "swarmlog-regions", idempotence_supported(settings))
    await start(consumer, settings)
    try:
        if COORDINATORS not in await consumer.topics():
            return []
        events = list[Event]()
        for partition in range(spec_for(settings, COORDINATORS).partitions):
            tp = TopicPartition(COORDINATORS, partition)
            consumer.assign([tp])
            first, end = (await consumer.beginning_offsets([tp]))[tp], (await consumer.end_offsets([tp]))[tp]
            consumer.seek(tp, max(first, end - RECENT_PER_REGION * (settings.regions + 1)))  # the regions and the top
            async for record in records_to_end(consumer, tp):
                with contextlib.suppress(DecodeError):
                    events.append(codec.decode_record(record.value or b"", COORDINATORS, partition, record.offset))
        return events
    finally:
        await consumer.stop()
