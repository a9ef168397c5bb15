"""The wait-for graph: a pure fold of WaitStarted/WaitEnded, a cycle finder, and the deadlock decision.

Rules:
- edges are keyed by wait_id, so one pair of agents may share several waits;
- an ended wait is remembered (for `retention_ms` of event time after it ended), so a redelivered
  WaitStarted of a finished wait never re-adds its edge;
- a cycle is identified by its wait ids, rotated to start at the smallest agent id: a cycle is reported
  once while it stands; once broken, the same agents waiting again through new waits are a new deadlock;
- the detector runs per new edge and reports the shortest cycle through it, with when each of its waits
  started (aborting the youngest wait, usually that new edge, breaks every cycle it closed).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections.abc import Mapping, Sequence
from typing import Any

from swarmlog.schemas.events import Event

from .alerts import alert, from_millis
from .persistent import PMap, TimedMap, replace

DEFAULT_RETENTION_MS = 300_000
WAIT_ROW, ENDED_ROW, REPORTED_ROW = "wait/", "ended/", "reported/"
"""Table row prefixes: the graph is stored one row per wait, ended wait and reported cycle."""


@dataclasses.dataclass(frozen=True, slots=True)
class Wait:
    """One active wait: `waiter` waits for `waits_for`."""

    wait_id: str
    waiter: str
    waits_for: str
    started_ms: int


@dataclasses.dataclass(frozen=True, slots=True)
class Cycle:
    """A wait-for cycle in canonical form: agents[i] waits for agents[i+1] (the last for the first) by wait_ids[i]."""

    agents: tuple[str, ...]
    wait_ids: tuple[str, ...]


@dataclasses.dataclass(frozen=True, slots=True)
class WaitGraph:
    """Active waits, the waits that ended recently, and the standing cycles already reported."""

    waits: Mapping[str, Wait] = dataclasses.field(default_factory=PMap)
    outgoing: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=PMap)
    ended: Mapping[str, int] = dataclasses.field(default_factory=TimedMap)
    reported: frozenset[tuple[str, ...]] = frozenset()
    retention_ms: int = DEFAULT_RETENTION_MS


INITIAL = WaitGraph()


def evolve(state: WaitGraph, event: Event) -> WaitGraph:
    """The graph after `event`; other events leave it as it is."""
    if event.name == "WaitStarted":
        return _started(state, event)
    if event.name == "WaitEnded":
        return _ended(state, event)
    if event.name == "DeadlockDetected":
        return _reported(state, event)
    return state


def canonical(agents: Sequence[str], wait_ids: Sequence[str]) -> Cycle:
    """The cycle rotated to start at its smallest agent id."""
    start = min(range(len(agents)), key=agents.__getitem__)
    return Cycle(tuple(agents[start:]) + tuple(agents[:start]), tuple(wait_ids[start:]) + tuple(wait_ids[:start]))


def cycle_through(state: WaitGraph, wait_id: str) -> Cycle | None:
    """The shortest simple cycle that uses the active wait `wait_id` (ties broken by wait id), or None."""
    first = state.waits.get(wait_id)
    if first is None:
        return None
    origin, target = first.waiter, first.waits_for
    came_from = {target: (origin, wait_id)}
    frontier = [target]
    while frontier and origin not in came_from:
        following = []
        for agent in frontier:
            for next_wait in sorted(state.outgoing.get(agent, ())):
                reached = state.waits[next_wait].waits_for
                if reached not in came_from:
                    came_from[reached] = (agent, next_wait)
                    following.append(reached)
        frontier = following
    if origin not in came_from:
        return None
    agents, wait_ids, agent = [], [], origin
    while not agents or agent != origin:
        agent, via = came_from[agent]
        agents.append(agent)
        wait_ids.append(via)
    return canonical(agents[::-1], wait_ids[::-1])


def decide_deadlocks(state: WaitGraph, now_ms: int, trigger: Event) -> list[Event]:
    """DeadlockDetected for the cycle the WaitStarted `trigger` (already folded) closed, unless already reported."""
    if trigger.name != "WaitStarted":
        return []
    cycle = cycle_through(state, trigger.data["wait_id"])
    if cycle is None or cycle.wait_ids in state.reported:
        return []
    return [
        alert(
            "DeadlockDetected",
            now_ms,
            cycle.wait_ids,
            causation_id=trigger.event_id,
            correlation_id=trigger.data.get("correlation_id"),
            cycle=list(cycle.agents),
            wait_ids=list(cycle.wait_ids),
            waits_started_at=[from_millis(state.waits[wait_id].started_ms) for wait_id in cycle.wait_ids],
        )
    ]


def table_entries(graph: WaitGraph) -> dict[str, Any]:
    """The graph as table rows: one per active wait, ended wait and reported cycle (outgoing is derived)."""
    return {**{WAIT_ROW + wait_id: wait for wait_id, wait in graph.waits.items()},
            **{ENDED_ROW + wait_id: at_ms for wait_id, at_ms in graph.ended.items()},
            **{_reported_row(key): key for key in graph.reported}}


def from_entries(rows: Mapping[str, Any]) -> WaitGraph:
    """The graph that `table_entries` rows make up (rows of other prefixes are ignored)."""
    waits = {key[len(WAIT_ROW):]: value for key, value in rows.items() if key.startswith(WAIT_ROW)}
    outgoing: dict[str, frozenset[str]] = {}
    for wait_id, wait in waits.items():
        outgoing[wait.waiter] = outgoing.get(wait.waiter, frozenset()) | {wait_id}
    ended = {key[len(ENDED_ROW):]: value for key, value in rows.items() if key.startswith(ENDED_ROW)}
    reported = frozenset(tuple(value) for key, value in rows.items() if key.startswith(REPORTED_ROW))
    return WaitGraph(PMap(waits), PMap(outgoing), TimedMap(ended), reported)


def entry_changes(before: WaitGraph, after: WaitGraph, event: Event) -> tuple[dict[str, Any], list[str]]:
    """The rows to write and to delete that turn `table_entries(before)` into `table_entries(after)`, where `after`
    is `before` with `event` (and the deadlocks decided on it) folded: only what those can touch is compared."""
    if after is before:
        return {}, []
    puts: dict[str, Any] = {}
    wait_id = event.data.get("wait_id")
    if wait_id in after.waits:
        puts[WAIT_ROW + wait_id] = after.waits[wait_id]
    if wait_id in after.ended:
        puts[ENDED_ROW + wait_id] = after.ended[wait_id]
    deletes = [WAIT_ROW + wait_id] if wait_id in before.waits and wait_id not in after.waits else []
    # Ended waits only ever leave by expiring, oldest first.
    deletes += [ENDED_ROW + gone for gone in itertools.takewhile(lambda key: key not in after.ended,
                                                                  before.ended.oldest())]
    puts.update({_reported_row(key): key for key in after.reported - before.reported})
    deletes += [_reported_row(key) for key in before.reported - after.reported]
    return puts, deletes


def _reported_row(key: tuple[str, ...]) -> str:
    return REPORTED_ROW + json.dumps(list(key))


def _started(state: WaitGraph, event: Event) -> WaitGraph:
    data = event.data
    wait_id = data["wait_id"]
    if wait_id in state.waits or wait_id in state.ended:
        return state
    wait = Wait(wait_id, data["waiter_agent_id"], data["waits_for_agent_id"], event.occurred_at_ms)
    return replace(
        state,
        waits=PMap.of(state.waits).set(wait_id, wait),
        outgoing=PMap.of(state.outgoing).set(wait.waiter, state.outgoing.get(wait.waiter, frozenset()) | {wait_id}),
    )


def _ended(state: WaitGraph, event: Event) -> WaitGraph:
    wait_id = event.data["wait_id"]
    if wait_id in state.ended:
        return state
    at_ms = event.occurred_at_ms
    ended = TimedMap.of(state.ended).expire(at_ms - state.retention_ms).set(wait_id, at_ms)
    waits, outgoing = PMap.of(state.waits), PMap.of(state.outgoing)
    wait = waits.get(wait_id)
    if wait is not None:
        waits, remaining = waits.delete(wait_id), outgoing[wait.waiter] - {wait_id}
        outgoing = outgoing.set(wait.waiter, remaining) if remaining else outgoing.delete(wait.waiter)
    reported = state.reported
    if any(wait_id in key for key in reported):
        reported = frozenset(key for key in reported if wait_id not in key)
    return replace(state, waits=waits, outgoing=outgoing, ended=ended, reported=reported)


def _reported(state: WaitGraph, event: Event) -> WaitGraph:
    key = canonical(event.data["cycle"], event.data["wait_ids"]).wait_ids
    if key in state.reported or any(wait_id in state.ended for wait_id in key):
        return state
    return replace(state, reported=state.reported | {key})
