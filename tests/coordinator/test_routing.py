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
        agent("busy", "code", tasks=frozenset({("m", "u", 0)})),
        agent("slow", "code", throttled=True),
        agent("gone", "code"),
        agent("poet", "poetry"),
    ]
    assert choose(spec("code"), agents, exclude=frozenset({"gone"})) is None


def test_final_steps_need_decision_making():
    final = spec("ops", "decision_making", kind="FINAL")
    assert choose(final, [agent("ops", "ops")]) is None
    assert choose(final, [agent("ops", "ops"), agent("boss", "decision_making")])[0].agent_id == "boss"


def test_an_agent_is_available_below_its_capacity_but_never_for_a_second_replica_of_one_task():
    running = agent("many", "code", tasks=frozenset({("m", "u", 0), ("m", "v", 0)}), capacity=3)
    assert choose(spec("code"), [running], mission_id="m") == (running, 1.0)
    assert choose(spec("code"), [agent("full", "code", tasks=running.tasks, capacity=2)], mission_id="m") is None
    holding = agent("twin", "code", tasks=frozenset({("m", "t", 1)}), capacity=3)
    assert choose(spec("code"), [holding], mission_id="m") is None
    assert choose(spec("code"), [holding], mission_id="other") == (holding, 1.0)
