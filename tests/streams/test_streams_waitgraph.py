"""Wait-for graph and deadlocks: the cycle finder against brute force, and one DeadlockDetected per standing cycle."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from streams_builders import assert_fold_laws, event, fold, stable

from swarmlog.schemas.records import DeadlockDetected
from swarmlog.streams import waitgraph
from swarmlog.streams.waitgraph import Cycle, canonical, cycle_through, decide_deadlocks, evolve

RETENTION = waitgraph.DEFAULT_RETENTION_MS


def started(wait_id: str, waiter: str, waits_for: str, at_ms: int = 0) -> object:
    return event(
        "WaitStarted",
        at_ms,
        f"start-{wait_id}",
        wait_id=wait_id,
        waiter_agent_id=waiter,
        waits_for_agent_id=waits_for,
        mission_id="m1",
        task_id=None,
    )


def ended(wait_id: str, waiter: str, waits_for: str, at_ms: int = 0) -> object:
    return event(
        "WaitEnded",
        at_ms,
        f"end-{wait_id}",
        wait_id=wait_id,
        waiter_agent_id=waiter,
        waits_for_agent_id=waits_for,
        outcome="ABORTED",
    )


def detect(state: waitgraph.WaitGraph, inputs: list) -> tuple[waitgraph.WaitGraph, list]:
    """What the worker does: fold each input, decide on it, fold the decisions back."""
    alerts = []
    for each in inputs:
        state = evolve(state, each)
        decided = decide_deadlocks(state, each.occurred_at, each)
        state = fold(evolve, state, decided)
        alerts += decided
    return state, alerts


def test_a_ring_of_three_waits_is_one_deadlock_with_the_cycle_in_wait_order():
    ring = [started("w1", "b", "c"), started("w2", "c", "a"), started("w3", "a", "b", at_ms=7)]
    state, alerts = detect(waitgraph.INITIAL, ring)
    assert [(a.name, a.cycle, a.wait_ids) for a in alerts] == [
        ("DeadlockDetected", ["a", "b", "c"], ["w3", "w1", "w2"])
    ]
    assert alerts[0].waits_started_at == [7, 0, 0]
    assert alerts[0].causation_id == "start-w3" and alerts[0].occurred_at == 7
    assert detect(state, ring)[1] == []


def test_breaking_one_edge_and_reforming_it_is_a_new_deadlock():
    state, first = detect(
        waitgraph.INITIAL, [started("w1", "a", "b"), started("w2", "b", "c"), started("w3", "c", "a")]
    )
    state, again = detect(state, [ended("w2", "b", "c"), started("w2", "b", "c"), started("w4", "b", "c")])
    assert [a.wait_ids for a in again] == [["w1", "w4", "w3"]]
    assert again[0].event_id != first[0].event_id


def test_a_wait_on_oneself_is_a_deadlock_and_a_redelivered_start_after_its_end_adds_no_edge():
    state, alerts = detect(waitgraph.INITIAL, [started("w1", "a", "a")])
    assert [a.cycle for a in alerts] == [["a"]]
    state = evolve(state, ended("w1", "a", "a"))
    assert detect(state, [started("w1", "a", "a")]) == (state, [])


def test_a_deadlock_folded_after_one_of_its_waits_ended_is_not_remembered():
    _state, alerts = detect(waitgraph.INITIAL, [started("w1", "a", "b"), started("w2", "b", "a")])
    late = fold(
        evolve, waitgraph.INITIAL, [started("w1", "a", "b"), started("w2", "b", "a"), ended("w1", "a", "b"), *alerts]
    )
    assert late.reported == frozenset()


def test_ended_waits_are_forgotten_after_the_retention():
    state = fold(
        evolve, waitgraph.INITIAL, [ended("w1", "a", "b", 0), ended("w2", "a", "b", waitgraph.DEFAULT_RETENTION_MS + 1)]
    )
    assert set(state.ended) == {"w2"}


EDGES = st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=9)


def brute_force_cycles(edges: list[tuple[int, int]]) -> set[Cycle]:
    """Every simple cycle of the multigraph, canonical, by enumerating paths from every start."""
    found = set()

    def extend(path: list[str], waits: list[str]) -> None:
        for index, (waiter, waits_for) in enumerate(edges):
            if f"a{waiter}" != path[-1]:
                continue
            if f"a{waits_for}" == path[0]:
                found.add(canonical(path, [*waits, f"w{index}"]))
            elif f"a{waits_for}" not in path:
                extend([*path, f"a{waits_for}"], [*waits, f"w{index}"])

    for agent in {waiter for waiter, _ in edges}:
        extend([f"a{agent}"], [])
    return found


@settings(max_examples=300, deadline=None)
@given(EDGES)
def test_the_cycle_finder_agrees_with_brute_force(edges):
    state = fold(evolve, waitgraph.INITIAL, [started(f"w{i}", f"a{u}", f"a{v}") for i, (u, v) in enumerate(edges)])
    cycles = brute_force_cycles(edges)
    for index in range(len(edges)):
        through = [cycle for cycle in cycles if f"w{index}" in cycle.wait_ids]
        found = cycle_through(state, f"w{index}")
        if not through:
            assert found is None
        else:
            assert found in through
            assert len(found.agents) == min(len(cycle.agents) for cycle in through)


@st.composite
def runs(draw):
    """A wait log as the worker writes it: starts and ends, deadlocks decided per start, redeliveries of recent
    events; now and then a retention passes, and waits are abandoned or forgotten."""
    state, log, decided, active, now = waitgraph.INITIAL, [], [], [], 0
    for step in range(draw(st.integers(0, 40))):
        now += draw(st.just(1000) | st.just(waitgraph.DEFAULT_RETENTION_MS))
        kind = draw(st.sampled_from(["start", "start", "end", "redeliver"]))
        if kind == "start":
            active.append((f"w{step}", f"a{draw(st.integers(0, 3))}", f"a{draw(st.integers(0, 3))}"))
            new = started(*active[-1], at_ms=now)
        elif kind == "end" and active:
            new = ended(*active.pop(draw(st.integers(0, len(active) - 1))), at_ms=now)
        elif kind == "redeliver" and (recent := [e for e in log if e.occurred_at > now - RETENTION // 2]):
            new = draw(st.sampled_from(recent))
        else:
            continue
        state, alerts = detect(state, [new])
        log += [new, *alerts]
        decided += alerts
    return log, decided


@settings(max_examples=150, deadline=None)
@given(runs(), st.data())
def test_the_wait_graph_fold_obeys_the_fold_laws(run, data):
    log, _ = run
    assert_fold_laws(evolve, waitgraph.INITIAL, log, data.draw(st.integers(0, len(log))))


@settings(max_examples=150, deadline=None)
@given(runs())
def test_each_cycle_is_reported_once(run):
    _, decided = run
    assert len({tuple(alert.wait_ids) for alert in decided}) == len(decided)


@settings(max_examples=150, deadline=None)
@given(runs(), st.integers(1, 5000))
def test_table_rows_follow_the_graph_one_worker_step_at_a_time(run, retention_ms):
    log, _ = run
    state, rows = dataclasses.replace(waitgraph.INITIAL, retention_ms=retention_ms), {}
    for each in (entry for entry in log if not isinstance(entry, DeadlockDetected)):
        after, _ = detect(state, [each])  # the wait and the deadlocks decided on it, as the worker folds them
        puts, deletes = waitgraph.entry_changes(state, after, each)
        assert not puts.keys() & set(deletes)
        for key in deletes:
            del rows[key]
        rows.update(puts)
        assert rows == waitgraph.table_entries(after)
        rebuilt = waitgraph.from_entries({**rows, "version": 3})
        assert stable(rebuilt) == stable(dataclasses.replace(after, retention_ms=waitgraph.DEFAULT_RETENTION_MS))
        state = after
