"""Registry and liveness: given events, when deciding at a time, then exactly the deaths the rules say."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from streams_builders import assert_fold_laws, event, fold, task_started

from swarmlog.streams import registry
from swarmlog.streams.keyed import RETENTION_MS
from swarmlog.streams.registry import decide_liveness, evolve


def registered(agent: str, at_ms: int, event_id: str) -> object:
    return event(
        "AgentRegistered",
        at_ms,
        event_id,
        agent_id=agent,
        capabilities=["code", "code", "review"],
        model="smollm2",
        brain="scripted",
        node="n1",
        gpu=0,
        region="r1",
        slot=3,
    )


def heartbeat(agent: str, at_ms: int, sequence: int, status: str = "BUSY", registration: str = "r1") -> object:
    return event(
        "AgentHeartbeat",
        at_ms,
        f"hb-{agent}-{registration}-{sequence}-{at_ms}",
        agent_id=agent,
        registration_id=registration,
        sequence=sequence,
        status=status,
        in_flight_task="m/t/0/1",
        region="r1",
        slot=3,
    )


def deregistered(agent: str, at_ms: int) -> object:
    return event("AgentDeregistered", at_ms, f"dereg-{agent}-{at_ms}", agent_id=agent, reason="shutdown")


def live(events: list, now_ms: int) -> tuple[registry.Registry, list]:
    """Fold `events`, decide at `now_ms`, fold the decisions back (what the worker does on a tick)."""
    state = fold(evolve, registry.INITIAL, events)
    deaths = decide_liveness(state, now_ms)
    return fold(evolve, state, deaths), deaths


def test_heartbeats_then_silence_declare_one_death_after_the_timeout_and_never_again():
    state = fold(
        evolve,
        registry.INITIAL,
        [registered("a", 0, "r1")] + [heartbeat("a", t, t // 1000) for t in range(1000, 4000, 1000)],
    )
    assert [decide_liveness(state, now) for now in range(3000, 8001, 500)] == [[]] * 11
    deaths = decide_liveness(state, 8001)
    assert [(d.name, d.agent_id, d.last_heartbeat_at, d.timeout_ms) for d in deaths] == [
        ("AgentDeclaredDead", "a", 3000, 5000)
    ]
    assert deaths[0].in_flight_task == "m/t/0/1" and deaths[0].producer == "streams"
    assert deaths[0].registration_id == "r1"
    after = fold(evolve, state, deaths)
    assert not after.agents["a"].alive
    assert decide_liveness(after, 60_000) == []
    assert decide_liveness(state, 9000)[0].event_id == deaths[0].event_id


def test_an_agent_is_silent_exactly_when_a_death_would_be_decided_for_it():
    state = registry.PROJECTION.rebuild(None, [registered("a", 0, "r1"), heartbeat("a", 1000, 1)])
    view = state.agents["a"]
    assert [registry.silent(view, now) for now in (6000, 6001)] == [False, True]
    assert not registry.silent(view, 6001, watched_since_ms=2000)  # the log could not be read before 2000
    for now, since in ((6000, 0), (6001, 0), (6001, 2000), (7001, 2000)):
        assert bool(decide_liveness(state, now, watched_since_ms=since)) == registry.silent(view, now, 5000, since)
    dead = fold(evolve, state, decide_liveness(state, 6001)).agents["a"]
    assert not registry.silent(dead, 60_000)


def test_reregistration_revives_with_a_new_epoch_and_a_new_death_is_a_new_event():
    state, first = live([registered("a", 0, "r1")], 6000)
    revived = evolve(state, registered("a", 7000, "r2"))
    assert revived.agents["a"].alive and revived.agents["a"].epoch == 2
    assert decide_liveness(revived, 12_000) == []
    second = decide_liveness(revived, 12_001)
    assert len(second) == 1 and second[0].event_id != first[0].event_id


def test_a_death_decided_for_an_older_epoch_does_not_kill_the_newer_one():
    stale = decide_liveness(fold(evolve, registry.INITIAL, [registered("a", 0, "r1")]), 6000)
    state = fold(evolve, registry.INITIAL, [registered("a", 0, "r1"), registered("a", 5500, "r2"), *stale])
    assert state.agents["a"].alive


def test_a_redelivered_registration_does_not_revive_a_dead_agent():
    state, _ = live([registered("a", 0, "r1")], 6000)
    assert not evolve(state, registered("a", 0, "r1")).agents["a"].alive


def test_out_of_order_heartbeats_never_move_the_last_heartbeat_back():
    state = fold(
        evolve,
        registry.INITIAL,
        [registered("a", 0, "r1"), heartbeat("a", 4000, 4, "IDLE"), heartbeat("a", 2000, 2, "BUSY")],
    )
    view = state.agents["a"]
    assert (view.last_heartbeat_ms, view.last_sequence, view.status) == (4000, 4, "IDLE")
    assert view.capabilities == ("code", "review")


def test_heartbeats_of_a_previous_run_are_ignored_even_when_they_come_later():
    state = fold(
        evolve,
        registry.INITIAL,
        [registered("a", 0, "r1"), registered("a", 5000, "r2"), heartbeat("a", 9000, 9, registration="r1")],
    )
    view = state.agents["a"]
    assert (view.registration_id, view.last_heartbeat_ms, view.last_sequence) == ("r2", 5000, -1)
    assert [d.registration_id for d in decide_liveness(state, 10_001)] == ["r2"]


def test_deregistration_leaves_liveness():
    state = fold(evolve, registry.INITIAL, [registered("a", 5000, "r1"), heartbeat("a", 5500, 1)])
    gone = evolve(state, deregistered("a", 6000))
    assert gone.agents["a"].liveness == "deregistered"
    assert decide_liveness(gone, 60_000) == []


def test_unknown_events_and_heartbeats_of_unknown_agents_leave_the_state_alone():
    assert evolve(registry.INITIAL, heartbeat("x", 1, 1)) is registry.INITIAL
    assert evolve(registry.INITIAL, task_started(1)) is registry.INITIAL


AGENTS = st.sampled_from(["a", "b", "c"])


@st.composite
def runs(draw):
    """A registry log as the worker writes it: inputs, and the deaths decided on ticks folded back; now and then
    a retention passes (views expire); redeliveries are of recent events."""
    state, log, decided, now, runs_of = registry.INITIAL, [], [], 0, {}
    for step in range(draw(st.integers(0, 40))):
        now += draw(st.integers(0, 4000) | st.just(RETENTION_MS))
        kind = draw(st.sampled_from(["register", "heartbeat", "heartbeat", "deregister", "tick", "redeliver"]))
        agent = draw(AGENTS)
        if kind == "register":
            new = [registered(agent, now, f"reg-{step}")]
            runs_of.setdefault(agent, []).append(f"reg-{step}")
        elif kind == "heartbeat":
            run = draw(st.sampled_from([*runs_of.get(agent, []), "reg-unknown"]))
            new = [heartbeat(agent, now - draw(st.integers(0, 1500)), step, registration=run)]
        elif kind == "deregister":
            new = [deregistered(agent, now)]
        elif kind == "redeliver" and (recent := [e for e in log if e.occurred_at > now - RETENTION_MS // 2]):
            new = [draw(st.sampled_from(recent))]
        else:
            new = []
        state = fold(evolve, state, new)
        deaths = decide_liveness(state, now)
        state = fold(evolve, state, deaths)
        log += new + deaths
        decided += deaths
    return log, decided


@settings(max_examples=150, deadline=None)
@given(runs(), st.data())
def test_the_registry_fold_obeys_the_fold_laws(run, data):
    log, _ = run
    assert_fold_laws(evolve, registry.INITIAL, log, data.draw(st.integers(0, len(log))), registry.evolve_all)


@settings(max_examples=150, deadline=None)
@given(runs())
def test_at_most_one_death_is_decided_per_registration_epoch(run):
    _, decided = run
    assert len({death.registration_id for death in decided}) == len(decided)
