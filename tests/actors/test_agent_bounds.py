"""The agent's state stays bounded however many attempts it ran, and what it drops is never needed for dedupe."""

from __future__ import annotations

import functools

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.actors.domain import (
    CLOCK_SKEW_MS,
    KEEP_MS,
    PRUNE_MS,
    STALE_MS,
    AgentState,
    HandleInbox,
    InboxDecision,
    Work,
    decide,
    evolve,
    initial,
)
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import TaskStarted, from_fields

ME = "agent-1"


def event(name: str, at_ms: int, event_id: str, **fields) -> Event:
    envelope = {
        "event_id": event_id,
        "occurred_at": at_ms,
        "correlation_id": "m1",
        "causation_id": None,
        "producer": "test",
    }
    return from_fields(name, envelope | fields)


def attempt(n: int) -> dict:
    return {"mission_id": f"m{n}", "task_id": "t1", "replica": 0, "attempt": 1, "agent_id": ME}


def assigned(n: int, at_ms: int) -> Event:
    return event(
        "TaskAssigned",
        at_ms,
        f"assign-{n}",
        **attempt(n),
        kind="WORK",
        slot=0,
        score=1.0,
        prompt="p",
        inputs={},
        required_capabilities=[],
        max_steps=3,
    )


def started(n: int, at_ms: int) -> Event:
    return event("TaskStarted", at_ms, f"assign-{n}/started", **attempt(n), ground_truth_version=None)


def completed(n: int, at_ms: int) -> Event:
    return event(
        "TaskCompleted",
        at_ms,
        f"assign-{n}/completed",
        **attempt(n),
        output="4",
        confidence=1.0,
        steps=1,
        prompt_tokens=1,
        completion_tokens=1,
        latency_ms=1,
    )


def voted(ballot: str, at_ms: int) -> Event:
    return event(
        "VoteCast",
        at_ms,
        f"{ballot}/vote",
        mission_id="m1",
        ballot_id=ballot,
        voter_agent_id=ME,
        candidate_id="c1",
        confidence=1.0,
        reason="r",
    )


def fold(state: AgentState, events) -> AgentState:
    return functools.reduce(evolve, events, state)


def test_thirty_thousand_attempts_keep_only_those_of_the_last_keep_ms():
    state = initial(ME)
    for n in range(30_000):  # one a second, over 8 hours
        state = fold(state, [started(n, n * 1_000), completed(n, n * 1_000 + 500), voted(f"b{n}", n * 1_000 + 600)])
    assert state.started == frozenset()
    assert KEEP_MS // 1_000 <= len(state.closed) <= (KEEP_MS + PRUNE_MS) // 1_000 + 1
    assert KEEP_MS // 1_000 <= len(state.ballots) <= (KEEP_MS + PRUNE_MS) // 1_000 + 1
    assert min(state.closed.values()) >= state.seen_ms - KEEP_MS - PRUNE_MS


def test_a_redelivery_within_the_window_is_skipped_and_a_stale_new_task_is_not_started():
    state = fold(initial(ME), [started(1, 10_000), completed(1, 11_000)])
    for later in (11_000, 11_000 + STALE_MS):
        assert decide(HandleInbox(assigned(1, 9_000), now_ms=later), state) == InboxDecision()
    assert decide(HandleInbox(assigned(2, 9_000), now_ms=9_000 + STALE_MS + 1), state) == InboxDecision()
    assert isinstance(decide(HandleInbox(assigned(2, 9_000), now_ms=9_000 + STALE_MS), state).events[0], TaskStarted)


def test_a_task_in_flight_is_never_dropped_and_resumes_however_old():
    state = fold(initial(ME), [started(1, 0), *(completed(n, n * 60_000) for n in range(2, 200))])
    assert state.started == {("m1", "t1", 0, 1)}
    (effect,) = decide(HandleInbox(assigned(1, 0), now_ms=state.seen_ms), state).effects
    assert isinstance(effect, Work)


def test_a_duplicate_start_after_the_close_does_not_reopen_the_attempt():
    state = fold(initial(ME), [started(1, 1_000), completed(1, 2_000), started(1, 1_000)])
    assert state.started == frozenset() and ("m1", "t1", 0, 1) in state.closed


def test_an_attempt_closed_by_a_clock_running_behind_is_dropped_only_once_its_command_is_stale():
    # The earliest drop: the first event of a minute (PRUNE_MS) just over KEEP_MS after the close, by an agent clock
    # CLOCK_SKEW_MS behind the coordinator's.
    drop_ms = 100 * PRUNE_MS
    at = drop_ms - KEEP_MS - 1 + CLOCK_SKEW_MS
    state = fold(initial(ME), [started(1, at - CLOCK_SKEW_MS), completed(1, at - CLOCK_SKEW_MS)])
    assert ("m1", "t1", 0, 1) in evolve(state, completed(2, drop_ms - 1)).closed
    dropped = evolve(state, completed(2, drop_ms))
    assert ("m1", "t1", 0, 1) not in dropped.closed
    assert decide(HandleInbox(assigned(1, at), now_ms=drop_ms), dropped) == InboxDecision()  # stale by 1 ms


times = st.integers(min_value=0, max_value=4 * KEEP_MS)


@given(
    st.lists(
        st.tuples(times, st.integers(0, STALE_MS), st.integers(0, CLOCK_SKEW_MS), st.integers(0, 2 * KEEP_MS)),
        max_size=40,
    ),
    st.randoms(use_true_random=False),
    st.integers(0, 2 * KEEP_MS),
)
def test_no_closed_attempt_is_ever_started_again_whatever_was_dropped(attempts, random, delay_ms):
    # Attempt n: assigned at `at` by the coordinator's clock, started `lag` later (while not stale) by the agent's
    # clock, which runs up to CLOCK_SKEW_MS behind, and closed `duration` after that. The agent's events fold in any
    # order across attempts (recovery folds partition after partition), in order within one.
    histories = [
        [started(n, at + lag - skew), completed(n, at + lag - skew + duration)]
        for n, (at, lag, skew, duration) in enumerate(attempts)
    ]
    order = [n for n, history in enumerate(histories) for _ in history]
    random.shuffle(order)
    state, folded = initial(ME), [0] * len(histories)
    for n in order:
        state, folded[n] = evolve(state, histories[n][folded[n]]), folded[n] + 1
    now = state.seen_ms + delay_ms  # any time after the newest event
    for n, (at, *_) in enumerate(attempts):
        assert decide(HandleInbox(assigned(n, at), now_ms=now), state) == InboxDecision(), f"attempt {n} started again"
    assert state.started == frozenset()
