"""Whether the worker has caught up with its input partitions, so a wall-clock decision sees every fact before it."""

from __future__ import annotations

from collections.abc import Iterable

import faust
from faust.types import TP


class Progress:
    """The next offset to fold per partition of some topics, compared with the partitions' high-water marks."""

    def __init__(self, app: faust.App, topics: Iterable[str]) -> None:
        self._app = app
        self._topics = frozenset(topics)
        self._next: dict[TP, int] = {}

    def processed(self, tp: TP, offset: int) -> None:
        """Record that the record at `offset` of `tp` has been folded."""
        self._next[tp] = offset + 1

    def caught_up(self) -> bool:
        """True when every assigned partition is folded up to its high-water mark and no rebalance or recovery runs."""
        app = self._app
        if app.rebalancing or not app.tables.recovery.completed.is_set():
            return False
        consumer = app.consumer
        for tp in consumer.assignment():
            if tp.topic not in self._topics:
                continue
            highwater = consumer.highwater(tp)
            # Nothing folded since (re)start: resume from the committed offset Faust sought to (None if never).
            next_offset = self._next.get(tp, consumer._committed_offset.get(tp))
            if highwater is None or (highwater > 0 and (next_offset or 0) < highwater):
                return False
        return True
