"""The agents routing may give a task now, grouped by capability set and sorted by load, so routing scores each set once."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Set
from typing import TYPE_CHECKING

from swarmlog.streams.persistent import Chunks, PMap, insert_sorted, remove_sorted

if TYPE_CHECKING:
    from swarmlog.coordinator.state import EnlistedAgent

Filing = tuple[frozenset[str], int]
"""Where an idle agent is filed: under its capabilities, at its load when it was filed."""


class IdleAgents(Set[str]):
    """A persistent set of agent ids (the available ones) that also keeps them by capability set, each group in
    (load, id) order: the order routing breaks ties in, so the first eligible agent of a group is its best."""

    __slots__ = ("_filed", "_groups")
    __hash__ = Set._hash

    def __init__(self, filed: Mapping[str, Filing] | None = None) -> None:
        self._filed: PMap[str, Filing] = PMap()
        self._groups: dict[frozenset[str], Chunks] = {}
        for agent_id, filing in (filed or {}).items():
            self._filed, self._groups = self._moved(agent_id, filing)

    @classmethod
    def of(cls, agents: Iterable[EnlistedAgent]) -> IdleAgents:
        """The available ones of `agents`."""
        return cls({agent.agent_id: filing for agent in agents if (filing := _filing(agent)) is not None})

    def __contains__(self, agent_id: object) -> bool:
        return agent_id in self._filed

    def __iter__(self) -> Iterator[str]:
        return iter(self._filed)

    def __len__(self) -> int:
        return len(self._filed)

    def __repr__(self) -> str:
        return f"IdleAgents({sorted(self._filed)!r})"

    def __reduce__(self) -> tuple[type[IdleAgents], tuple[dict[str, Filing]]]:
        return IdleAgents, (dict(self._filed.items()),)  # filed again on loading: string hashes differ by process

    def put(self, agent: EnlistedAgent) -> IdleAgents:
        """This set with the agent filed by its capabilities and load when it is available, else without it."""
        filed, groups = self._moved(agent.agent_id, _filing(agent))
        if filed is self._filed:
            return self
        new: IdleAgents = object.__new__(IdleAgents)
        new._filed, new._groups = filed, groups
        return new

    def groups(self) -> Iterator[tuple[frozenset[str], Iterator[tuple[int, str]]]]:
        """Each capability set of idle agents, with its agents as (load, id) from the lowest."""
        for capabilities, chunks in self._groups.items():
            yield capabilities, (entry for chunk in chunks for entry in chunk)

    def _moved(self, agent_id: str, now: Filing | None) -> tuple[PMap[str, Filing], dict[frozenset[str], Chunks]]:
        """The index with the agent filed under `now` (nowhere when None): the same objects when nothing moved."""
        was = self._filed.get(agent_id)
        if was == now:
            return self._filed, self._groups
        groups, filed = dict(self._groups), self._filed
        if was is not None:
            kept = remove_sorted(groups[was[0]], (was[1], agent_id))
            if kept:
                groups[was[0]] = kept
            else:
                del groups[was[0]]
            filed = filed.delete(agent_id)
        if now is not None:
            groups[now[0]] = insert_sorted(groups.get(now[0], ()), (now[1], agent_id))
            filed = filed.set(agent_id, now)
        return filed, groups


def _filing(agent: EnlistedAgent) -> Filing | None:
    """Where an agent is filed: under its capabilities, at its load, while it is available; else nowhere."""
    return (agent.capabilities, agent.load) if agent.available else None
