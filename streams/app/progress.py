"""Whether the registry fold has caught up with its input partitions, so a wall-clock decision sees every fact before
it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Mapping

from aiokafka import TopicPartition

from .expiry import Rebalances
from .grouped import GroupFold

POLL_S = 0.01
MARKS = 240
"""End offsets remembered at most (one per tick with a decision pending: two minutes at the default tick); a fold
lagging more than that decides for the oldest kept."""
logger = logging.getLogger(__name__)


class Progress:
    """The fold's next offsets per input partition, compared with the partitions' end offsets asked of the broker."""

    def __init__(self, fold: GroupFold) -> None:
        self._fold = fold
        self._marks: deque[tuple[int, Mapping[TopicPartition, int]]] = deque(maxlen=MARKS)
        self._rebalances = Rebalances(lambda: fold.generation)  # marks name the partitions assigned when asked

    def settled(self) -> bool:
        """True outside rebalances, once the fold holds the rows of every assigned partition."""
        return self._fold.settled()

    def caught_up(self) -> bool:
        """True when every assigned partition is folded up to its last fetch's high-water mark, outside rebalances."""
        return self._fold.caught_up()

    def to_ask(self) -> list[TopicPartition] | None:
        """The partitions a mark asks the end offsets of (the assigned ones); None while the rows are not restored
        yet: then there is no decision to take. A rebalance since the last call forgets the older marks (they name the
        partitions of before) but still asks, so the first tick with a death due is not lost to it."""
        self._marks_hold()
        return self._fold.assigned() if self._fold.settled() else None

    async def folded_until(self, asked_ms: int, ends: Mapping[TopicPartition, int] | None, wait_s: float) -> int | None:
        """The latest moment (ms since the epoch) before which every record of the assigned partitions is folded, or
        None while no such moment is known: a decision that a silence is final may be taken for that moment.

        `ends` are the end offsets of the partitions `to_ask` named, as the broker gave them at `asked_ms` (the
        liveness watch asks them with its ping: one request a tick); None: no answer. They are remembered with that
        moment (a mark); this then waits up to `wait_s` for the fold to reach them, and answers the newest mark the
        fold has reached, this call's or an earlier one's. Records written after a mark are not waited for, so a busy
        topic cannot starve the decision: a fold that keeps up reaches each mark within a fetch or two, and one that
        lags by more than `wait_s` still reaches the marks of earlier ticks, its decisions coming that much later.
        """
        if ends is None:  # no answer now: earlier marks may still be reached
            logger.warning("end offsets unavailable; liveness decides on a later tick")
        else:
            self._marks.append((asked_ms, ends))
        deadline = time.monotonic() + wait_s
        while self._marks and not self._fold.folded_to(self._marks[-1][1]) and time.monotonic() < deadline:
            if not self._fold.settled():
                break
            await asyncio.sleep(POLL_S)
        if not self._marks_hold():
            return None
        reached = None
        while self._marks and self._fold.folded_to(self._marks[0][1]):  # ends only grow: the reached marks come first
            reached, _ = self._marks.popleft()
        return reached

    def _marks_hold(self) -> bool:
        """Whether the marks still name the partitions the fold holds: all are forgotten at a rebalance."""
        if self._rebalances.since_asked() or not self._fold.settled():
            self._marks.clear()
            return False
        return True
