"""Waiting for the broker, as an operator sees it: one WARNING when a wait begins, one when it ends, and a gauge.

While a broker is away aiokafka retries on its own (a send waits in its buffer up to `request_timeout_ms`), so a
process sees no error, only a call that does not return. `BrokerWait` turns the outcomes a process observes (an
answer, an error, a call still pending after `patience_s`) into what it waits for and for how long: the WARNING lines
and `Sensor.on_broker_waiting` (`swarmlog_broker_waiting_seconds` on /metrics, 0 while the broker answers).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from aiokafka.errors import KafkaError

from swarmlog.envelope import now_ms
from swarmlog.metrics import Sensor

PATIENCE_S = 2.0  # a request unanswered this long counts as waiting (a send takes milliseconds while all is well)
log = logging.getLogger(__name__)
T = TypeVar("T")


class BrokerWait:
    """How long a process has waited for the broker at `bootstrap` to `what` (e.g. "take the agent's events").

    A wait counts from the last answer before it (from its first failure when none came before) and ends at the next
    answer. Feed it every outcome with `answered` and `failed`, or run requests through `through`.
    """

    def __init__(self, sensor: Sensor, bootstrap: str, what: str) -> None:
        self._sensor, self._bootstrap, self._what = sensor, bootstrap, what
        self.answered_ms: int | None = None  # the last answer
        self.waiting_since_ms: int | None = None  # None while the broker answers
        self.resumed_ms = 0  # when the last wait ended (0: none ended yet)

    def answered(self, at_ms: int) -> None:
        """The broker answered at `at_ms`: a wait ends (one WARNING saying how long it lasted)."""
        if self.waiting_since_ms is not None:
            log.warning(
                "the broker at %s answers again after %.1f s", self._bootstrap, (at_ms - self.waiting_since_ms) / 1000
            )
            self.resumed_ms = at_ms
        self.answered_ms, self.waiting_since_ms = at_ms, None
        self._sensor.on_broker_waiting(0.0)

    def failed(self, at_ms: int, exc: BaseException) -> None:
        """The broker did not answer at `at_ms`: a wait begins (one WARNING saying why) or goes on."""
        if self.waiting_since_ms is None:
            self.waiting_since_ms = self.answered_ms if self.answered_ms is not None else at_ms
            log.warning("waiting for the broker at %s to %s (%r)", self._bootstrap, self._what, exc)
        self._sensor.on_broker_waiting((at_ms - self.waiting_since_ms) / 1000)

    async def through(self, request: Awaitable[T], patience_s: float = PATIENCE_S) -> T:
        """The request's result, telling the wait every `patience_s` it stays pending, and how it ended; a
        KafkaError is told and raised again."""
        pending = asyncio.ensure_future(request)
        try:
            while not (await asyncio.wait([pending], timeout=patience_s))[0]:
                self.failed(now_ms(), TimeoutError(f"no answer within {patience_s:g} s"))
            result = pending.result()
        except KafkaError as exc:
            self.failed(now_ms(), exc)
            raise
        finally:
            pending.cancel()  # only when the caller is cancelled: the request is done otherwise
        self.answered(now_ms())
        return result
