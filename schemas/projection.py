"""The descriptor of a state derived from the log: which topics it folds, where it starts, how each event changes it.

Every process that holds or rebuilds a state (the live process, its crash recovery, replay, `status`, the client's
progress, the tests) takes these from the state's one `Projection`, so no two of them derive it differently.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from swarmlog.schemas.events import Event

Key = TypeVar("Key")
State = TypeVar("State")


@dataclasses.dataclass(frozen=True)
class Projection(Generic[Key, State]):
    """One state of the system as a pure fold of events read from `topics`."""

    name: str
    topics: tuple[str, ...]
    """The topics whose events it folds, by their names in the topic catalog (`swarmlog.topics`)."""
    initial: Callable[[Key], State]
    """The state before any event, for one instance (a region's config, an agent id, ...)."""
    evolve: Callable[[State, Event], State]
    """The state after one more event: the function the live process itself runs."""
    snapshot_version: int
    """The version of the state's stored encoding (snapshots, checkpoints, table values): a snapshot written with
    another version is not read back, the state is folded again from the log instead."""
    evolve_all: Callable[[State, Iterable[Event]], State] | None = None
    """The same fold over many events at once, where the state has a faster batch form (same result)."""

    def fold(self, state: State, events: Iterable[Event]) -> State:
        """The state after `events`, in order."""
        if self.evolve_all is not None:
            return self.evolve_all(state, events)
        evolve = self.evolve
        for event in events:
            state = evolve(state, event)
        return state

    def rebuild(self, key: Key, events: Iterable[Event]) -> State:
        """The state of instance `key` after `events` from the start."""
        return self.fold(self.initial(key), events)
