"""Token budgets: counted once per generation, never negative, exceeded once per window, restored at its end."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from streams_builders import assert_fold_laws, event, fold

from swarmlog.schemas.records import BudgetExceeded, BudgetRestored
from swarmlog.streams import budgets
from swarmlog.streams.budgets import BudgetPolicy, decide_budget, evolve
from swarmlog.streams.keyed import RETENTION_MS

POLICY = BudgetPolicy(default_tokens=1000, per_agent={"big": 5000})


def used(agent: str, generation: str, at_ms: int, prompt: int = 300, completion: int = 200) -> object:
    return event(
        "TokensUsed",
        at_ms,
        f"use-{generation}",
        agent_id=agent,
        generation_id=generation,
        prompt_tokens=prompt,
        completion_tokens=completion,
        mission_id=None,
        task_id=None,
    )


def window_set(window_ms: int, at_ms: int) -> object:
    return event("BudgetWindowSet", at_ms, f"window-{window_ms}-{at_ms}", window_ms=window_ms, tokens=1000)


def run(state: budgets.Budgets, inputs: list) -> tuple[budgets.Budgets, list]:
    """What the worker does: fold each input (an event, or a tick in ms), decide, fold the decisions back."""
    alerts = []
    for each in inputs:
        state = state if isinstance(each, int) else evolve(state, each)
        decided = decide_budget(state, each, POLICY)
        state = fold(evolve, state, decided)
        alerts += decided
    return state, alerts


def summary(alerts: list) -> list[tuple]:
    return [(a.name, a.agent_id, a.window_start) for a in alerts]


def test_passing_the_budget_throttles_once_per_window_and_a_tick_at_its_end_restores():
    state, alerts = run(
        budgets.INITIAL,
        [
            used("a", "g1", 1000),
            used("a", "g2", 2000),
            used("a", "g3", 3000),
            used("a", "g4", 4000),
            59_999,
            60_000,
            61_000,
        ],
    )
    assert summary(alerts) == [("BudgetExceeded", "a", 0), ("BudgetRestored", "a", 60_000)]
    exceeded = alerts[0]
    assert (exceeded.used, exceeded.budget, exceeded.window_end) == (1500, 1000, 60_000)
    assert alerts[1].occurred_at == 60_000 and state.agents["a"].throttled_until is None


def test_usage_equal_to_the_budget_is_allowed_and_overrides_apply_per_agent():
    _, alerts = run(budgets.INITIAL, [used("a", "g1", 0, 500, 500), used("big", "g2", 0, 3000, 1000)])
    assert alerts == []


def test_the_next_usage_in_a_later_window_restores_with_the_same_event_as_a_tick_would():
    state, _ = run(budgets.INITIAL, [used("a", "g1", 0, 2000, 0)])
    _, by_usage = run(state, [used("a", "g2", 185_000, 2000, 0)])
    _, by_tick = run(state, [185_000])
    assert summary(by_usage) == [("BudgetRestored", "a", 60_000), ("BudgetExceeded", "a", 180_000)]
    assert by_usage[0].event_id == by_tick[0].event_id


def test_a_redelivered_usage_is_not_counted_twice_and_late_usage_for_a_closed_window_is_ignored():
    first = used("a", "g1", 1000)
    state = fold(evolve, budgets.INITIAL, [first, used("a", "g2", 2000), first])
    assert state.agents["a"].used == 1000
    later = fold(evolve, state, [used("a", "g3", 61_000), first, used("a", "g0", 500)])
    assert (later.agents["a"].window_start, later.agents["a"].used) == (60_000, 500)


def test_negative_token_counts_count_as_zero():
    state = evolve(budgets.INITIAL, used("a", "g1", 0, -50, 20))
    assert state.agents["a"].used == 20


def test_a_redelivered_exceeded_after_the_restore_does_not_throttle_again():
    _, alerts = run(budgets.INITIAL, [used("a", "g1", 0, 2000, 0), 60_000])
    state = fold(evolve, budgets.INITIAL, [used("a", "g1", 0, 2000, 0), *alerts, *alerts[:1]])
    assert state.agents["a"].throttled_until is None


@st.composite
def runs(draw):
    """A usage log as the worker writes it: usage on mostly rising event time (now and then a retention passes, and
    usages expire), ticks, redeliveries of recent events."""
    state, log, decided, now = budgets.INITIAL, [], [], 0
    for step in range(draw(st.integers(0, 40))):
        now += draw(st.integers(0, 30_000) | st.just(RETENTION_MS))
        kind = draw(st.sampled_from(["use", "use", "use", "tick", "redeliver", "window"]))
        if kind == "window":
            new = [window_set(draw(st.sampled_from([10_000, 30_000, budgets.DEFAULT_WINDOW_MS])), now)]
        elif kind == "use":
            tokens = draw(st.integers(-100, 800))
            new = [used(draw(st.sampled_from(["a", "b", "big"])), f"g{step}", now, tokens, draw(st.integers(-10, 400)))]
        elif kind == "redeliver" and (recent := [e for e in log if e.occurred_at > now - RETENTION_MS // 2]):
            new = [draw(st.sampled_from(recent))]
        else:
            new = [now]
        state, alerts = run(state, new)
        log += [each for each in new if not isinstance(each, int)] + alerts
        decided += alerts
    return log, decided, state


@settings(max_examples=150, deadline=None)
@given(runs(), st.data())
def test_the_budget_fold_obeys_the_fold_laws(run_, data):
    log, _, _ = run_
    assert_fold_laws(evolve, budgets.INITIAL, log, data.draw(st.integers(0, len(log))), budgets.evolve_all)


@settings(max_examples=150, deadline=None)
@given(runs())
def test_numbers_are_never_negative_and_each_window_is_exceeded_and_restored_at_most_once(run_):
    _, decided, state = run_
    assert all(usage.used >= 0 for usage in state.agents.values())
    assert all(a.used > a.budget >= 0 for a in decided if isinstance(a, BudgetExceeded))
    keys = summary(decided)
    assert len(set(keys)) == len(keys)


@settings(max_examples=150, deadline=None)
@given(runs())
def test_every_throttle_is_restored_after_a_tick_past_its_window(run_):
    _, decided, state = run_
    ends = [a for a in decided if isinstance(a, BudgetExceeded)]
    _, restored = run(state, [max([a.window_end for a in ends], default=0)])
    restorations = {a.window_start for a in decided + restored if isinstance(a, BudgetRestored)}
    assert all(a.window_end in restorations for a in ends)


def test_the_window_length_is_the_latest_window_set_in_the_log():
    state = budgets.PROJECTION.rebuild(None, [window_set(10_000, 0), used("a", "g1", 9_999), used("a", "g2", 10_000)])
    assert (state.window_ms, state.agents["a"].window_start, state.agents["a"].used) == (10_000, 10_000, 500)
    assert budgets.PROJECTION.rebuild(None, []).window_ms == budgets.DEFAULT_WINDOW_MS


def test_usage_is_bucketed_by_the_window_set_before_it_and_a_window_under_1_ms_is_ignored():
    log = [used("a", "g1", 59_000), window_set(10_000, 59_500), used("a", "g2", 59_999), window_set(0, 60_000)]
    state = budgets.PROJECTION.rebuild(None, log)
    assert (state.window_ms, state.agents["a"].window_start, state.agents["a"].used) == (10_000, 50_000, 500)
    assert state == budgets.PROJECTION.fold(budgets.INITIAL, log) == fold(evolve, budgets.INITIAL, log)
