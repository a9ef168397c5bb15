"""Routing: Jaccard scores, eligibility and the deterministic tie-break."""

from swarmlog.coordinator.routing import choose, score
from swarmlog.coordinator.state import EnlistedAgent, TaskSpec


def agent(agent_id: str, *capabilities: str, **fields: object) -> EnlistedAgent:
    return EnlistedAgent(agent_id, "eu", 0, frozenset(capabilities), **fields)


def spec(*required: str, kind: str = "WORK") -> TaskSpec:
    return TaskSpec("t", "p", frozenset(required), kind=kind)


def test_score_is_jaccard_and_half_without_requirements():
    assert score(frozenset({"a", "b"}), frozenset({"b", "c"})) == 1 / 3
    assert score(frozenset(), frozenset({"x"})) == 0.5


def test_highest_score_wins_then_lowest_load_then_id():
    agents = [agent("b", "code", load=1), agent("c", "code"), agent("a", "code", "extra"), agent("d", "code")]
    assert choose(spec("code"), agents) == (agents[1], 1.0)
    assert choose(spec("code"), [agents[0], agent("e", "code", load=1)])[0].agent_id == "b"


def test_dead_busy_throttled_excluded_and_unmatched_agents_are_never_chosen():
    agents = [
        agent("dead", "code", alive=False),
        agent("busy", "code", task=("m", "t", 0)),
        agent("slow", "code", throttled=True),
        agent("gone", "code"),
        agent("poet", "poetry"),
    ]
    assert choose(spec("code"), agents, exclude=frozenset({"gone"})) is None


def test_final_steps_need_decision_making():
    final = spec("ops", "decision_making", kind="FINAL")
    assert choose(final, [agent("ops", "ops")]) is None
    assert choose(final, [agent("ops", "ops"), agent("boss", "decision_making")])[0].agent_id == "boss"
