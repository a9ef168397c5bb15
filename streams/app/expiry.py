"""What the worker keeps in memory only until the group rebalances: whether it has, and the decisions in flight.

(The rows of a keyed table, held per partition until a rebalance and dropped as they expire: streams/app/keyed.py.)
"""

from __future__ import annotations

from collections.abc import Callable

Generation = Callable[[], int]
"""A group's generation now: it changes at each rebalance."""


class Rebalances:
    """Whether the group rebalanced (its generation changed), so partitions may have moved, since last asked."""

    def __init__(self, generation: Generation) -> None:
        self._generation_now = generation
        self._generation = generation()

    def since_asked(self) -> bool:
        """Whether a rebalance happened since the last call (or since this was built)."""
        generation, self._generation = self._generation, self._generation_now()
        return generation != self._generation


class InFlight:
    """The ids of decisions sent and not folded back yet, which a tick does not send again. Forgotten at a rebalance:
    a decision of a partition that moved is folded by its new owner, and one sent again is a duplicate its readers
    drop (decisions' ids are derived from what they decide)."""

    def __init__(self, generation: Generation) -> None:
        self._rebalances = Rebalances(generation)
        self._ids: set[str] = set()

    def sending(self, event_id: str) -> bool:
        """Whether to send the decision `event_id` (it is not in flight yet); it is in flight from now on."""
        if self._rebalances.since_asked():
            self._ids.clear()
        if event_id in self._ids:
            return False
        self._ids.add(event_id)
        return True

    def folded(self, event_id: str) -> None:
        """The event `event_id` was folded: if it was a decision in flight, it has landed."""
        self._ids.discard(event_id)
