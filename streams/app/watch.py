"""Since when the worker has had the broker without a gap: the start of the silence a death may be decided on.

During a broker outage no heartbeat can be written or read, so every agent looks silent; right after it, the worker
may read the log before the agents have written again. Deaths are decided on silence since the watch began (see
`decide_liveness`'s `watched_since_ms`): an outage, or the worker itself stalling, restarts the watch.
"""

from __future__ import annotations

import asyncio
import logging

from aiokafka.errors import KafkaError

from swarmlog.metrics import Sensor

from .ends import EndOffsets
from .records import now_ms

logger = logging.getLogger(__name__)


class Watch:
    """Pings the broker every tick; `since_ms` is when the current unbroken run of answers began.

    On a cluster the broker may answer while a heartbeat partition takes no writes (its in-sync replicas below
    min.insync.replicas after a node loss): for the agents that is an outage too, so such an answer does not count.
    """

    def __init__(self, ends: EndOffsets, bootstrap: str, gap_ms: int, sensor: Sensor,
                 writable: tuple[tuple[str, ...], int] = ((), 1)) -> None:
        self._ends, self._bootstrap, self._gap_ms, self._sensor = ends, bootstrap, gap_ms, sensor
        self._writable = writable  # (topics, in-sync replicas): an answer counts only while these take writes
        self.since_ms = 0  # from the worker's start: a restarted worker decides at once, as before
        self._answered_ms: int | None = None
        self._waiting_since_ms: int | None = None

    async def check(self, patience_s: float) -> bool:
        """Ask the broker once; whether it answered within `patience_s`."""
        try:
            async with asyncio.timeout(patience_s):
                await self._ends.ping(*self._writable)
        except (KafkaError, TimeoutError) as exc:
            self.failed(now_ms(), exc)
            return False
        self.answered(now_ms())
        return True

    def answered(self, at_ms: int) -> None:
        """The broker answered at `at_ms`: after a gap longer than `gap_ms`, the watch starts again from now."""
        previous, self._answered_ms = self._answered_ms, at_ms
        if previous is not None and at_ms - previous > self._gap_ms:
            self.since_ms = at_ms
            logger.warning("the broker at %s answers again after %.1f s; deaths are decided on silence from now on",
                           self._bootstrap, (at_ms - previous) / 1000)
        self._waiting_since_ms = None
        self._sensor.on_broker_waiting(0.0)

    def failed(self, at_ms: int, exc: BaseException) -> None:
        """The broker did not answer at `at_ms`: log once per outage what the worker waits for, and for how long."""
        if self._waiting_since_ms is None:
            self._waiting_since_ms = self._answered_ms if self._answered_ms is not None else at_ms
            logger.warning("waiting for the broker at %s (%r); no agent is declared dead while it is away",
                           self._bootstrap, exc)
        self._sensor.on_broker_waiting((at_ms - self._waiting_since_ms) / 1000)
