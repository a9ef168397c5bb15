"""A broker outage is not the death of every agent: silence counts from when the worker last regained the log."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from streams_builders import event, fold

from swarmlog.metrics import Sensor
from swarmlog.streams import registry
from swarmlog.streams.app.watch import Watch
from swarmlog.streams.registry import decide_liveness, evolve

TIMEOUT = 5000


def registered(agent: str, at_ms: int) -> object:
    return event(
        "AgentRegistered",
        at_ms,
        f"reg-{agent}",
        agent_id=agent,
        capabilities=["code"],
        model="m",
        brain="scripted",
        node="n1",
        gpu=None,
        region="r1",
        slot=0,
    )


def agents_silent_since(at_ms: int, *agents: str) -> registry.Registry:
    return fold(evolve, registry.INITIAL, [registered(agent, at_ms) for agent in agents])


def test_given_a_12_s_outage_when_the_log_is_back_no_agent_dies_until_a_full_timeout_has_passed_since():
    state = agents_silent_since(1000, "a", "b")  # last heard at 1 s; the broker is away from 1 s to 13 s
    back = 13_000
    assert decide_liveness(state, back + 100, TIMEOUT) != []  # without the watch: everyone is "dead"
    assert decide_liveness(state, back + 100, TIMEOUT, watched_since_ms=back) == []
    assert decide_liveness(state, back + TIMEOUT, TIMEOUT, watched_since_ms=back) == []
    deaths = decide_liveness(state, back + TIMEOUT + 1, TIMEOUT, watched_since_ms=back)
    assert [d.agent_id for d in deaths] == ["a", "b"]  # truly silent agents still die, a timeout later
    assert all(d.last_heartbeat_at == deaths[0].last_heartbeat_at for d in deaths)


@given(st.integers(0, 100_000), st.integers(0, 100_000), st.integers(0, 100_000), st.integers(1, 20_000))
def test_the_watch_only_ever_delays_a_death_and_never_past_one_timeout_after_it_began(heard, since, now, timeout):
    state = agents_silent_since(heard, "a")
    plain = decide_liveness(state, now, timeout)
    watched = decide_liveness(state, now, timeout, watched_since_ms=since)
    assert not watched or plain == watched  # a decision the watch allows is the same decision
    if now - since > timeout:
        assert watched == plain  # watched for a full timeout: the silence decides alone


@given(st.lists(st.integers(0, 100_000), min_size=1, max_size=4), st.integers(0, 100_000), st.integers(1, 20_000))
def test_the_next_silence_is_the_first_moment_a_death_is_decided(heard, since, timeout):
    state = fold(evolve, registry.INITIAL, [registered(f"a{i}", at) for i, at in enumerate(heard)])
    first = registry.next_silence_ms(state, timeout, since)
    assert first is not None
    assert decide_liveness(state, first - 1, timeout, since) == []
    assert decide_liveness(state, first, timeout, since) != []


def test_no_silence_is_next_once_every_agent_is_dead():
    state = agents_silent_since(1000, "a")
    dead = fold(evolve, state, decide_liveness(state, 1000 + TIMEOUT + 1, TIMEOUT))
    assert registry.next_silence_ms(dead, TIMEOUT) is None


class Recorded(Sensor):
    def __init__(self) -> None:
        self.waits: list[float] = []

    def on_broker_waiting(self, seconds: float) -> None:
        self.waits.append(seconds)


def test_the_watch_restarts_after_a_gap_in_answers_and_the_sensor_shows_the_wait():
    sensor = Recorded()
    watch = Watch(ends=None, bootstrap="b:9092", gap_ms=2000, sensor=sensor)  # type: ignore[arg-type]
    for at in (0, 500, 1000):
        watch.answered(at)
    assert watch.since_ms == 0  # answers without a gap: deaths decide on plain silence
    watch.failed(2000, TimeoutError())
    watch.failed(9000, ConnectionError())
    watch.answered(13_000)
    assert watch.since_ms == 13_000
    assert sensor.waits == [0.0, 0.0, 0.0, 1.0, 8.0, 0.0]
    watch.answered(16_000)  # the worker itself stalled for 3 s: it could not have read a heartbeat either
    assert watch.since_ms == 16_000
