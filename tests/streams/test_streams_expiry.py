"""Bounded tables (issue #19, item 5): in a long run of agents coming and going the registry, the budgets and the wait
graph keep only what is current, and decide exactly what the unbounded folds decide."""

from __future__ import annotations

import random
from collections.abc import Iterator

from hypothesis import given, settings
from hypothesis import strategies as st
from streams_builders import event, fold, stable
from test_streams_budgets import POLICY, used
from test_streams_registry import deregistered, heartbeat, registered
from test_streams_waitgraph import detect, ended, started

from swarmlog.replay.components import component
from swarmlog.replay.fold import Record, replay
from swarmlog.schemas.codec import encode
from swarmlog.streams import budgets, registry, waitgraph
from swarmlog.streams.keyed import RETENTION_MS
from swarmlog.streams.registry import decide_liveness

TIMEOUT_MS = registry.DEFAULT_TIMEOUT_MS
RETENTION = waitgraph.DEFAULT_RETENTION_MS


def agent_lives(agents: int, seed: int) -> Iterator[tuple[int, list]]:
    """Ticks (every 5 s) with the inputs written since the last: an agent starts every 3 s, with a new id, beats every
    2 s for one to two minutes, then deregisters or falls silent for good (killed)."""
    rng = random.Random(seed)
    planned: dict[int, list] = {}
    for index in range(agents):
        agent, born = f"agent-{index}", 3000 * index
        planned.setdefault(born, []).append(registered(agent, born, f"run-{index}"))
        life = rng.randrange(60_000, 120_000, 2000)
        for sequence, at in enumerate(range(born + 2000, born + life, 2000)):
            planned.setdefault(at, []).append(heartbeat(agent, at, sequence, "IDLE", registration=f"run-{index}"))
        if rng.random() < 0.5:
            planned.setdefault(born + life, []).append(deregistered(agent, born + life))
    for now in range(0, max(planned) + RETENTION_MS + 10_000, 5000):
        yield now, [each for at in range(now - 4000, now + 1000, 1000) for each in planned.get(at, [])]


def test_a_long_run_of_agent_churn_keeps_the_registry_bounded_and_declares_the_deaths_the_unbounded_fold_does():
    bounded, unbounded, largest = registry.INITIAL, {}, 0
    for now, inputs in agent_lives(2000, seed=5):
        bounded = registry.evolve_all(bounded, inputs)
        for each in inputs:
            unbounded[each.agent_id] = registry.evolve_agent(unbounded.get(each.agent_id), each)
        deaths = decide_liveness(bounded, now)
        assert deaths == decide_liveness(registry.Registry(unbounded), now)
        bounded = registry.evolve_all(bounded, deaths)
        for death in deaths:
            unbounded[death.agent_id] = registry.evolve_agent(unbounded[death.agent_id], death)
        assert all(view == unbounded[agent] for agent, view in bounded.agents.items())
        assert all(agent in bounded.agents for agent, view in unbounded.items() if view.alive)
        largest = max(largest, len(bounded.agents))
    assert len(unbounded) == 2000 and sum(not view.alive for view in unbounded.values()) == 2000
    assert largest <= RETENTION_MS // 3000 + 2 * 120_000 // 3000, largest  # who left in the retention, and the living
    assert list(registry.evolve(bounded, registered("newcomer", now, "run-new")).agents) == ["newcomer"]


def test_a_dropped_run_stays_dropped_and_a_new_registration_starts_afresh():
    gone = fold(
        registry.evolve, registry.INITIAL, [registered("a", 0, "r1"), heartbeat("a", 1000, 1), deregistered("a", 2000)]
    )
    later = 1000 + RETENTION_MS
    assert "a" in registry.evolve(gone, heartbeat("b", later - 1, 1)).agents
    assert registry.evolve(gone, heartbeat("a", later, 2)).agents == {}, "a late heartbeat of r1 resurrects nothing"
    for stale in (
        event(
            "AgentDeclaredDead",
            later,
            "d1",
            agent_id="a",
            registration_id="r1",
            last_heartbeat_at=0,
            timeout_ms=5000,
            in_flight_task=None,
        ),
        deregistered("a", later),
    ):
        assert registry.evolve(gone, stale).agents == {}
    back = registry.evolve(gone, registered("a", later, "r2"))
    view = back.agents["a"]
    assert (view.alive, view.epoch, view.registration_id, view.last_heartbeat_ms) == (True, 1, "r2", later)
    [death] = decide_liveness(back, later + TIMEOUT_MS + 1)
    assert death.registration_id == "r2"


def test_an_alive_agent_never_expires_however_long_it_is_silent():
    state = registry.evolve(registry.INITIAL, registered("a", 0, "r1"))
    assert registry.evolve(state, heartbeat("b", 10 * RETENTION_MS, 1)).agents["a"].alive


def budget_lives(agents: int, seed: int) -> Iterator[tuple[int, list]]:
    """Ticks (every 5 s) with the usage written by then: an agent starts every 10 s, with a new id, and uses
    tokens for two to five minutes (some over their budget), then never again."""
    rng = random.Random(seed)
    planned: dict[int, list] = {}
    for index in range(agents):
        agent, born = f"agent-{index}", 10_000 * index
        for step, at in enumerate(range(born, born + rng.randrange(120_000, 300_000, 5000), 5000)):
            planned.setdefault(at, []).append(used(agent, f"g-{index}-{step}", at, rng.randrange(0, 300), 50))
    for now in range(0, max(planned) + RETENTION_MS + 120_000, 5000):
        yield now, planned.get(now, [])


def test_a_long_run_of_usage_churn_keeps_the_budgets_bounded_and_decides_what_the_unbounded_fold_does():
    bounded, unbounded, largest, decided = budgets.INITIAL, budgets.INITIAL, 0, []

    def fold_in(event_) -> None:
        nonlocal bounded, unbounded
        bounded = budgets.evolve(bounded, event_)
        agent = event_.agent_id
        kept = budgets.evolve_usage(unbounded.agents.get(agent), event_, unbounded.window_ms)
        unbounded = budgets.Budgets({**unbounded.agents, agent: kept}) if kept else unbounded

    for now, inputs in budget_lives(300, seed=7):
        for each in [*inputs, now]:
            if not isinstance(each, int):
                fold_in(each)
            decisions = budgets.decide_budget(bounded, each, POLICY)
            assert decisions == budgets.decide_budget(unbounded, each, POLICY)
            for decision in decisions:
                fold_in(decision)
            decided += decisions
        assert all(usage == unbounded.agents[agent] for agent, usage in bounded.agents.items())
        largest = max(largest, len(bounded.agents))
    assert {d.name for d in decided} == {"BudgetExceeded", "BudgetRestored"} and len(unbounded.agents) == 300
    assert largest <= (RETENTION_MS + 2 * 60_000 + 300_000) // 10_000, largest
    assert list(budgets.evolve(bounded, used("newcomer", "g-new", now)).agents) == ["newcomer"]


def test_a_throttled_agent_keeps_its_usage_until_restored():
    state = budgets.evolve(budgets.INITIAL, used("a", "g1", 0, 2000, 0))
    [exceeded] = budgets.decide_budget(state, 0, POLICY)
    state = budgets.evolve(state, exceeded)
    far = 10 * RETENTION_MS
    assert budgets.evolve(state, used("b", "g2", far)).agents["a"].throttled_until == 60_000
    [restored] = budgets.decide_budget(state, far, POLICY)
    assert "a" not in fold(budgets.evolve, state, [restored, used("b", "g2", far)]).agents


def test_a_wait_left_behind_by_a_dead_waiter_is_abandoned_after_the_retention_and_closes_no_cycle():
    state, _ = detect(waitgraph.INITIAL, [started("w1", "a", "b", 0)])
    _, closed = detect(state, [started("w2", "b", "a", RETENTION)])
    assert len(closed) == 1, "a wait is active for its whole retention"
    state, alerts = detect(state, [started("w2", "b", "a", RETENTION + 1)])
    assert alerts == [] and set(state.waits) == {"w2"} and state.ended == {"w1": RETENTION}
    assert detect(state, [started("w1", "a", "b", RETENTION + 2)]) == (state, []), "a redelivered start adds nothing"
    later = waitgraph.evolve(state, ended("x", "c", "d", 2 * RETENTION + 2))
    assert set(later.waits) == set() and later.ended == {"w2": 2 * RETENTION + 1, "x": 2 * RETENTION + 2}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 60_000), st.integers(0, 90_000)), max_size=40
    )
)
def test_waits_that_end_within_their_timeout_give_the_deadlocks_the_unbounded_graph_gives(waits):
    log, at = [], 0
    for index, (waiter, waits_for, lasts, pause) in enumerate(waits):
        at += pause
        log += [
            started(f"w{index}", f"a{waiter}", f"a{waits_for}", at),
            ended(f"w{index}", f"a{waiter}", f"a{waits_for}", at + lasts),
        ]
    log.sort(key=lambda each: each.occurred_at)
    forever = waitgraph.WaitGraph(retention_ms=10**15)
    assert detect(waitgraph.INITIAL, log)[1] == detect(forever, log)[1]


def test_a_long_run_of_abandoned_waits_keeps_the_graph_bounded():
    state = waitgraph.INITIAL
    for index in range(5000):  # a wait every 10 s whose waiter dies: no WaitEnded ever comes
        state = waitgraph.evolve(state, started(f"w{index}", f"a{index}", "b", 10_000 * index))
    assert len(state.waits) + len(state.ended) <= 2 * RETENTION // 10_000 + 1
    assert len(state.outgoing) == len(state.waits)


def test_the_replay_drops_what_the_live_table_drops_on_each_partition_s_own_event_time():
    """Partition 0 hears again after the retention and drops its deregistered agent; partition 1 does not, and keeps
    its own, as the live table's partitions do."""
    events = [
        (0, registered("a", 0, "r1")),
        (1, registered("b", 0, "r2")),
        (0, deregistered("a", 10)),
        (1, deregistered("b", 10)),
        (0, registered("c", RETENTION_MS + 5, "r3")),
    ]
    records = [
        Record("swarm.agents.registry", partition, offset, each.occurred_at, None, encode(each))
        for offset, (partition, each) in enumerate(events)
    ]
    replayed = replay(component("registry"), None, ("region-0",), records)
    assert sorted(replayed.state.agents) == ["b", "c"] and replayed.events == 5
    by_partition = {p: fold(registry.evolve, registry.INITIAL, [e for q, e in events if q == p]) for p in (0, 1)}
    assert stable(replayed.state.agents) == stable({**by_partition[0].agents, **by_partition[1].agents})
