"""Whether the worker has caught up with its input partitions, so a wall-clock decision sees every fact before it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Iterable, Mapping

import faust
from aiokafka.errors import KafkaError
from faust.tables import TableManager
from faust.transport.consumer import Consumer
from faust.types import TP

from .ends import EndOffsets
from .expiry import Rebalances
from .records import now_ms

POLL_S = 0.01
MARKS = 240
"""End offsets remembered at most (one per tick with a decision pending: two minutes at the default tick); a fold
lagging more than that decides for the oldest kept."""
logger = logging.getLogger(__name__)


class Progress:
    """The next offset to fold per partition of some topics, compared with the partitions' high-water marks."""

    def __init__(self, app: faust.App, topics: Iterable[str], ends: EndOffsets) -> None:
        self._app = app
        self._topics = frozenset(topics)
        self._ends = ends
        self._next: dict[TP, int] = {}
        self._marks: deque[tuple[int, Mapping[TP, int]]] = deque(maxlen=MARKS)
        self._rebalances = Rebalances(app)  # marks name the partitions assigned when asked: forgotten at a rebalance

    def processed(self, tp: TP, offset: int) -> None:
        """Record that the record at `offset` of `tp` has been folded."""
        self._next[tp] = offset + 1

    def settled(self) -> bool:
        """True outside rebalances, once the tables are restored: the folds then hold every assigned partition."""
        tables = self._app.tables
        assert isinstance(tables, TableManager), "the app's table manager is Faust's"
        return not self._app.rebalancing and tables.recovery.completed.is_set()

    def caught_up(self) -> bool:
        """True when every assigned partition is folded up to its last fetch's high-water mark, outside rebalances."""
        consumer = self._app.consumer
        return self.settled() and self._folded_to({tp: consumer.highwater(tp) for tp in self._assigned()})

    async def folded_until(self, patience_s: float) -> int | None:
        """The latest moment (ms since the epoch) before which every record of the assigned partitions is folded, or
        None while no such moment is known: a decision that a silence is final may be taken for that moment.

        Each call asks the broker for its end offsets now and remembers them with the time it asked (a mark); it
        then waits up to `patience_s` for the fold to reach them, and answers the newest mark the fold has reached,
        this call's or an earlier one's. Records written after a mark are not waited for, so a busy topic cannot
        starve the decision: a fold that keeps up reaches each mark within a fetch or two, and one that lags by more
        than `patience_s` still reaches the marks of earlier ticks, its decisions coming that much later.
        """
        if self._rebalances.since_asked() or not self.settled():
            self._marks.clear()
        if not self.settled():
            return None
        asked_ms = now_ms()
        try:
            async with asyncio.timeout(patience_s):
                ends = await self._ends.of(self._assigned())
        except (KafkaError, TimeoutError) as exc:  # no answer now: earlier marks may still be reached
            logger.warning("end offsets unavailable (%r); liveness decides on a later tick", exc)
            ends = None
        if ends is not None:
            self._marks.append((asked_ms, ends))
        deadline = time.monotonic() + patience_s
        while self._marks and not self._folded_to(self._marks[-1][1]) and time.monotonic() < deadline:
            if self._app.rebalancing:
                break
            await asyncio.sleep(POLL_S)
        if self._rebalances.since_asked() or not self.settled():
            self._marks.clear()
            return None
        reached = None
        while self._marks and self._folded_to(self._marks[0][1]):  # ends only grow: the reached marks come first
            reached, _ = self._marks.popleft()
        return reached

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
