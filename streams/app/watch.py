"""Since when the worker has had the broker without a gap: the start of the silence a death may be decided on.

During a broker outage no heartbeat can be written or read, so every agent looks silent; right after it, the worker
may read the log before the agents have written again. Deaths are decided on silence since the watch began (see
`decide_liveness`'s `watched_since_ms`): an outage, or the worker itself stalling, restarts the watch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from swarmlog.kafka.waiting import BrokerWait
from swarmlog.metrics import Sensor

from .ends import EndOffsets, Ping
from .records import now_ms

logger = logging.getLogger(__name__)


class Watch:
    """Pings the broker every tick; `since_ms` is when the current unbroken run of answers began.

    On a cluster the broker may answer while a heartbeat partition takes no writes (its in-sync replicas below
    min.insync.replicas after a node loss): for the agents that is an outage too, so such an answer does not count.
    """

    def __init__(
        self,
        ends: EndOffsets,
        bootstrap: str,
        gap_ms: int,
        sensor: Sensor,
        writable: tuple[tuple[str, ...], int] = ((), 1),
    ) -> None:
        self._ends, self._gap_ms = ends, gap_ms
        self._writable = writable  # (topics, in-sync replicas): an answer counts only while these take writes
        self._wait = BrokerWait(sensor, bootstrap, "answer the liveness watch; no agent is declared dead meanwhile")
        self.since_ms = 0  # from the worker's start: a restarted worker decides at once, as before

    async def check(self, patience_s: float, also: Iterable[TopicPartition] = ()) -> tuple[bool, Ping | None]:
        """Ask the broker once (with the end offsets of `also`, in the same requests); whether it answered within
        `patience_s` with the heartbeats writable, and its answer (None: no answer)."""
        try:
            ping = await self._ends.ping(*self._writable, patience_s=patience_s, also=also)
        except (KafkaError, TimeoutError) as exc:
            self.failed(now_ms(), exc)
            return False, None
        if ping.unwritable is not None:
            self.failed(now_ms(), ping.unwritable)
            return False, ping
        self.answered(now_ms())
        return True, ping

    def answered(self, at_ms: int) -> None:
        """The broker answered at `at_ms`: after a gap longer than `gap_ms`, the watch starts again from now."""
        previous = self._wait.answered_ms
        self._wait.answered(at_ms)  # ends a wait (its WARNING, the gauge back to 0)
        if previous is not None and at_ms - previous > self._gap_ms:
            self.since_ms = at_ms
            logger.warning(
                "no answer from the broker for %.1f s; deaths are decided on silence from now on",
                (at_ms - previous) / 1000,
            )

    def failed(self, at_ms: int, exc: BaseException) -> None:
        """The broker did not answer at `at_ms`: the wait's WARNING once per outage, and its length on the gauge."""
        self._wait.failed(at_ms, exc)
