"""The wait-for graph: a pure fold of WaitStarted/WaitEnded, a cycle finder, and the deadlock decision.

Rules:
- edges are keyed by wait_id, so one pair of agents may share several waits;
- an ended wait is remembered (for `retention_ms` of event time after it ended), so a redelivered
  WaitStarted of a finished wait never re-adds its edge;
- a wait still active `retention_ms` after it started is abandoned: it ends then, as if its WaitEnded had come. An
  agent ends its own waits within its ask timeout (`swarmlog agent --ask-timeout-s`, 60 s by default, which must
  stay below `retention_ms`), so such a wait's waiter died or stopped without a word, and it can close no real cycle;
- both go by event time: before a WaitStarted or WaitEnded is folded, what has ended or expired by its time has,
  so the graph (and its table) holds only what is current;
- a cycle is identified by its wait ids, rotated to start at the smallest agent id: a cycle is reported
  once while it stands; once broken, the same agents waiting again through new waits are a new deadlock;
- the detector runs per new edge and reports the shortest cycle through it, with when each of its waits
  started (aborting the youngest wait, usually that new edge, breaks every cycle it closed).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import DeadlockDetected, WaitEnded, WaitStarted
from swarmlog.topics import ALERTS, WAITS

from .alerts import alert
from .persistent import PMap, TimedMap, replace

DEFAULT_RETENTION_MS = 300_000
WAIT_ROW, ENDED_ROW, REPORTED_ROW = "wait/", "ended/", "reported/"
"""Table row prefixes: the graph is stored one row per wait, ended wait and reported cycle."""
STARTED = operator.attrgetter("started_ms")
"""The time a wait is kept by in `WaitGraph.waits`."""


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
    """Active waits (by start), the waits that ended recently, and the standing cycles already reported."""

    waits: Mapping[str, Wait] = dataclasses.field(default_factory=functools.partial(TimedMap, time_of=STARTED))
    outgoing: Mapping[str, frozenset[str]] = dataclasses.field(default_factory=PMap)
    ended: Mapping[str, int] = dataclasses.field(default_factory=TimedMap)
    reported: frozenset[tuple[str, ...]] = frozenset()
    retention_ms: int = DEFAULT_RETENTION_MS


INITIAL = WaitGraph()


def evolve(state: WaitGraph, event: Event) -> WaitGraph:
    """The graph after `event`; other events leave it as it is."""
    match event:
        case WaitStarted():
            return _started(_expired(state, event.occurred_at), event)
        case WaitEnded():
            return _ended(_expired(state, event.occurred_at), event)
        case DeadlockDetected():
            return _reported(state, event)
        case _:
            return state


PROJECTION: Projection[None, WaitGraph] = Projection(
    "waitgraph", (WAITS, ALERTS), lambda _: INITIAL, evolve, snapshot_version=1
)
"""The wait-for graph: the edges of swarm.waits, and the deadlocks it reported on swarm.alerts (the worker's
`waitgraph` table holds it as `table_entries`)."""


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
    agents: list[str] = []
    wait_ids: list[str] = []
    agent = origin
    while not agents or agent != origin:
        agent, via = came_from[agent]
        agents.append(agent)
        wait_ids.append(via)
    return canonical(agents[::-1], wait_ids[::-1])


def decide_deadlocks(state: WaitGraph, now_ms: int, trigger: Event) -> list[DeadlockDetected]:
    """DeadlockDetected for the cycle the WaitStarted `trigger` (already folded) closed, unless already reported."""
    if not isinstance(trigger, WaitStarted):
        return []
    cycle = cycle_through(state, trigger.wait_id)
    if cycle is None or cycle.wait_ids in state.reported:
        return []
    return [
        alert(
            DeadlockDetected,
            now_ms,
            cycle.wait_ids,
            causation_id=trigger.event_id,
            correlation_id=trigger.correlation_id,
            cycle=list(cycle.agents),
            wait_ids=list(cycle.wait_ids),
            waits_started_at=[state.waits[wait_id].started_ms for wait_id in cycle.wait_ids],
        )
    ]


def table_entries(graph: WaitGraph) -> dict[str, Any]:
    """The graph as table rows: one per active wait, ended wait and reported cycle (outgoing is derived)."""
    return {
        **{WAIT_ROW + wait_id: wait for wait_id, wait in graph.waits.items()},
        **{ENDED_ROW + wait_id: at_ms for wait_id, at_ms in graph.ended.items()},
        **{_reported_row(key): key for key in graph.reported},
    }


def from_entries(rows: Mapping[str, Any]) -> WaitGraph:
    """The graph that `table_entries` rows make up (rows of other prefixes are ignored)."""
    waits = {key[len(WAIT_ROW) :]: value for key, value in rows.items() if key.startswith(WAIT_ROW)}
    outgoing: dict[str, frozenset[str]] = {}
    for wait_id, wait in waits.items():
        outgoing[wait.waiter] = outgoing.get(wait.waiter, frozenset()) | {wait_id}
    ended = {key[len(ENDED_ROW) :]: value for key, value in rows.items() if key.startswith(ENDED_ROW)}
    reported = frozenset(tuple(value) for key, value in rows.items() if key.startswith(REPORTED_ROW))
    return WaitGraph(TimedMap(waits, STARTED), PMap(outgoing), TimedMap(ended), reported)


def entry_changes(before: WaitGraph, after: WaitGraph, event: Event) -> tuple[dict[str, Any], list[str]]:
    """The rows to write and to delete that turn `table_entries(before)` into `table_entries(after)`, where `after`
    is `before` with `event` (and the deadlocks decided on it) folded: only what those can touch is compared."""
    if after is before:
        return {}, []
    wait_id = event.wait_id if isinstance(event, WaitStarted | WaitEnded) else None
    # Waits leave by ending (the event's) or by being abandoned (the oldest); ended waits only by expiring (the
    # oldest). The event's wait may come back at once, with a new time, if it had expired.
    gone = dict.fromkeys(_changed(before.waits, after.waits))
    if wait_id is not None and wait_id in before.waits and wait_id not in after.waits:
        gone[wait_id] = None
    touched = [*gone] if wait_id is None else [*gone, wait_id]
    puts: dict[str, Any] = {ENDED_ROW + key: after.ended[key] for key in touched if key in after.ended}
    if wait_id is not None and wait_id in after.waits:
        puts[WAIT_ROW + wait_id] = after.waits[wait_id]
    deletes = [WAIT_ROW + key for key in gone if key not in after.waits]
    deletes += [ENDED_ROW + key for key in _changed(before.ended, after.ended) if key not in after.ended]
    puts.update({_reported_row(key): key for key in after.reported - before.reported})
    deletes += [_reported_row(key) for key in before.reported - after.reported]
    return puts, deletes


def _reported_row(key: tuple[str, ...]) -> str:
    return REPORTED_ROW + json.dumps(list(key))


def _changed(before: Mapping[str, Any], after: Mapping[str, Any]) -> Iterator[str]:
    """The oldest keys of `before` (a TimedMap) up to the first one that `after` holds as it was."""
    return itertools.takewhile(lambda key: after.get(key) != before[key], TimedMap.of(before).oldest())


def _waits(waits: Mapping[str, Wait]) -> TimedMap[str, Wait]:
    return TimedMap.of(waits, STARTED)


def _expired(state: WaitGraph, now_ms: int) -> WaitGraph:
    """The graph at `now_ms`: the waits active for `retention_ms` ended then, the waits ended that long ago forgotten."""
    horizon = now_ms - state.retention_ms
    for wait_id in list(_waits(state.waits).before(horizon)):
        state = _close(state, wait_id, state.waits[wait_id].started_ms + state.retention_ms)
    ended = TimedMap.of(state.ended).expire(horizon)
    return state if ended is state.ended else replace(state, ended=ended)


def _started(state: WaitGraph, event: WaitStarted) -> WaitGraph:
    wait_id = event.wait_id
    if wait_id in state.waits or wait_id in state.ended:
        return state
    wait = Wait(wait_id, event.waiter_agent_id, event.waits_for_agent_id, event.occurred_at)
    return replace(
        state,
        waits=_waits(state.waits).set(wait_id, wait),
        outgoing=PMap.of(state.outgoing).set(wait.waiter, state.outgoing.get(wait.waiter, frozenset()) | {wait_id}),
    )


def _ended(state: WaitGraph, event: WaitEnded) -> WaitGraph:
    wait_id = event.wait_id
    return state if wait_id in state.ended else _close(state, wait_id, event.occurred_at)


def _close(state: WaitGraph, wait_id: str, at_ms: int) -> WaitGraph:
    """The graph with `wait_id` ended at `at_ms`: out of the graph, among the ended waits, its cycles broken."""
    waits, outgoing = _waits(state.waits), PMap.of(state.outgoing)
    wait = waits.get(wait_id)
    if wait is not None:
        waits, remaining = waits.delete(wait_id), outgoing[wait.waiter] - {wait_id}
        outgoing = outgoing.set(wait.waiter, remaining) if remaining else outgoing.delete(wait.waiter)
    reported = state.reported
    if any(wait_id in key for key in reported):
        reported = frozenset(key for key in reported if wait_id not in key)
    return replace(
        state, waits=waits, outgoing=outgoing, ended=TimedMap.of(state.ended).set(wait_id, at_ms), reported=reported
    )


def _reported(state: WaitGraph, event: DeadlockDetected) -> WaitGraph:
    key = canonical(event.cycle, event.wait_ids).wait_ids
    if key in state.reported or any(wait_id in state.ended for wait_id in key):
        return state
    return replace(state, reported=state.reported | {key})
