"""Whether the worker has caught up with its input partitions, so a wall-clock decision sees every fact before it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Mapping

import faust
from aiokafka.errors import KafkaError
from faust.tables import TableManager
from faust.transport.consumer import Consumer
from faust.types import TP

from .ends import EndOffsets

POLL_S = 0.01
logger = logging.getLogger(__name__)


class Progress:
    """The next offset to fold per partition of some topics, compared with the partitions' high-water marks."""

    def __init__(self, app: faust.App, topics: Iterable[str], ends: EndOffsets) -> None:
        self._app = app
        self._topics = frozenset(topics)
        self._ends = ends
        self._next: dict[TP, int] = {}

    def processed(self, tp: TP, offset: int) -> None:
        """Record that the record at `offset` of `tp` has been folded."""
        self._next[tp] = offset + 1

    def caught_up(self) -> bool:
        """True when every assigned partition is folded up to its last fetch's high-water mark, outside rebalances."""
        app, tables = self._app, self._app.tables
        assert isinstance(tables, TableManager), "the app's table manager is Faust's"
        if app.rebalancing or not tables.recovery.completed.is_set():
            return False
        consumer = app.consumer
        return self._folded_to({tp: consumer.highwater(tp) for tp in self._assigned()})

    async def reaches_broker_end(self, patience_s: float) -> bool:
        """Whether the fold reaches, within `patience_s`, the end offsets the broker reports when asked now.

        Every record written before the call is then folded: the last fetch's high-water marks can be stale by a
        delivery, and a decision that a silence is final needs this. Records written meanwhile (other agents keep
        writing) are not waited for, so a busy topic cannot starve the decision.
        """
        if not self.caught_up():
            return False
        deadline = time.monotonic() + patience_s
        try:
            async with asyncio.timeout(patience_s):
                ends = await self._ends.of(self._assigned())
        except (KafkaError, TimeoutError) as exc:  # no answer now: the next tick asks again
            logger.warning("end offsets unavailable (%r); liveness decides on a later tick", exc)
            return False
        if ends is None:  # the client has not started yet
            return False
        while not self._folded_to(ends):
            if self._app.rebalancing or time.monotonic() > deadline:
                return False
            await asyncio.sleep(POLL_S)
        return not self._app.rebalancing

    def _assigned(self) -> list[TP]:
        return [tp for tp in self._app.consumer.assignment() if tp.topic in self._topics]

    def _folded_to(self, highwaters: Mapping[TP, int | None]) -> bool:
        consumer = self._app.consumer
        assert isinstance(consumer, Consumer), "the app's consumer is Faust's"
        committed = consumer._committed_offset
        for tp, highwater in highwaters.items():
            # Nothing folded since (re)start: resume from the committed offset Faust sought to (None if never).
            next_offset = self._next.get(tp, committed.get(tp))
            if highwater is None or (highwater > 0 and (next_offset or 0) < highwater):
                return False
        return True
