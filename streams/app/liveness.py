"""The registry table and liveness: registrations and heartbeats folded per agent, deaths decided on a timer.

Both input topics are keyed by agent_id with the same partition count, so one group folds them into one table
co-partitioned with them, off Faust's per-record path (grouped.py): heartbeats are most of the worker's input. A death
is produced to the registry topic and takes effect when folded back from there, so the log, not the table, decides
what happened; deaths in flight are not decided again. A death's event_id is derived from its registration, so a
duplicate after a crash is the same event and every reader dedupes it. The view of a dead or deregistered agent
expires (`registry.expires_at`), so the table holds the agents of the last minutes.
"""

from __future__ import annotations

import asyncio
import time

from swarmlog.streams.registry import (
    PROJECTION,
    Registry,
    agent_of,
    decide_liveness,
    evolve_agent,
    expires_at,
    next_silence_ms,
)
from swarmlog.topics import min_insync_replicas

from .config import StreamsConfig
from .ends import EndOffsets
from .expiry import InFlight
from .grouped import Folded, GroupFold
from .progress import Progress
from .records import WorkerTopics, now_ms
from .transport import WorkerApp
from .watch import Watch

REGISTRY, HEARTBEATS = PROJECTION.topics  # where deaths go (folded back from there), and the agents' heartbeats


def install(app: WorkerApp, io: WorkerTopics, config: StreamsConfig) -> GroupFold:
    """Add the registry's fold and the liveness timer to `app`; returns the fold."""

    async def landed(folded: Folded) -> None:
        for event, _ in folded:
            in_flight.folded(event.event_id)

    fold = app.group_fold(
        GroupFold(config, io, "registry", PROJECTION.topics, agent_of, evolve_agent, expires_at, landed)
    )
    in_flight = InFlight(lambda: fold.generation)
    ends = EndOffsets(config.settings, f"{config.app_id}-end-offsets")
    app.service(ends)  # type: ignore[arg-type]  # typed for a service class, but starts an instance just the same
    progress = Progress(fold)
    # A gap without an answer long enough to make a 1 Hz agent look silent for half the timeout is an outage (or the
    # worker stalled): the watch starts again. A shorter one is a busy broker answering late: under the load of 2,000
    # agents it answered every few seconds after 2-3 s, and a watch restarting each time never let a silence last.
    watch = Watch(
        ends,
        config.settings.bootstrap or "",
        gap_ms=max(int(config.tick_s * 4000), config.liveness_timeout_ms // 2),
        sensor=io.sensor,
        writable=((HEARTBEATS,), min_insync_replicas(config.settings)),
    )
    timeout_ms, built, recovered = (
        config.liveness_timeout_ms,
        time.monotonic(),
        list[float](),
    )  # recovery = from building the app to catching up

    async def declare_deaths() -> None:
        if progress.settled():  # a silence that falls before the next tick is decided at its moment, not a tick late
            await until(next_silence_ms(Registry(fold.items()), timeout_ms, watch.since_ms), config.tick_s)
        now, views = now_ms(), fold.items()
        due = progress.settled() and decide_liveness(Registry(views), now, timeout_ms, watch.since_ms)
        # A heartbeat written before `now` may not be folded yet: a death is decided for the latest moment before
        # which every record is folded (a heartbeat folded after it only shows an agent alive). The end offsets that
        # moment is found with are asked with the broker's ping, in its requests: one ListOffsets a tick per leader.
        # The broker may take as long to answer either; the wait for the fold is short: a mark not reached now is
        # decided on at a later tick.
        answered, folded_until = await ask_broker(
            watch, progress if due else None, patience_s=config.tick_s * 4, wait_s=config.tick_s / 2
        )
        if not answered or not progress.settled():
            return
        if not recovered and progress.caught_up():
            recovered.append(time.monotonic())
            io.sensor.on_recovered("streams", recovered[0] - built)
        for agent_id, view in views.items():  # the sensor's heartbeat ages; dead or gone agents drop out
            io.sensor.on_heartbeat_age(agent_id, (now - view.last_heartbeat_ms) / 1000 if view.alive else None)
        if folded_until is None:
            return
        deaths = decide_liveness(Registry(fold.items()), folded_until, timeout_ms, watch.since_ms)
        await io.send_all(REGISTRY, [(death.agent_id, death) for death in deaths if in_flight.sending(death.event_id)])

    app.timer(config.tick_s, name="liveness")(declare_deaths)
    return fold


async def until(moment_ms: int | None, within_s: float) -> None:
    """Sleep until `moment_ms` (ms since the epoch) when it comes within `within_s`; return at once otherwise."""
    wait_s = (moment_ms - now_ms()) / 1000 if moment_ms is not None else 0
    if 0 < wait_s < within_s:
        await asyncio.sleep(wait_s)


async def ask_broker(
    watch: Watch, progress: Progress | None, patience_s: float, wait_s: float
) -> tuple[bool, int | None]:
    """One liveness tick's questions: the watch's ping and, with `progress` (a decision due), a mark of the fold's
    progress, both answered by the same ListOffsets requests. Whether the broker answered with the heartbeats
    writable, and the moment before which every assigned record is folded (None: none known yet)."""
    asking = progress.to_ask() if progress is not None else None
    answered, ping = await watch.check(patience_s, also=asking or ())
    if progress is None or asking is None:
        return answered, None
    # A ping that failed still gives the marks what its leaders answered; the fold is waited for only when the
    # answer is used now (before, that wait ran alongside the ping).
    ends = ping.ends_of(asking) if ping is not None else None
    folded = await progress.folded_until(ping.asked_ms if ping is not None else 0, ends, wait_s if answered else 0)
    return answered, folded
