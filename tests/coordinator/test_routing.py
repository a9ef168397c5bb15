"""Routing: Jaccard scores, eligibility and the deterministic tie-break, over the idle agents' index."""

from __future__ import annotations

import pickle

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.coordinator import routing
from swarmlog.coordinator.idle import IdleAgents
from swarmlog.coordinator.routing import score
from swarmlog.coordinator.state import EnlistedAgent, TaskSpec


def agent(agent_id: str, *capabilities: str, **fields: object) -> EnlistedAgent:
    return EnlistedAgent(agent_id, "eu", 0, frozenset(capabilities), **fields)


def spec(*required: str, kind: str = "WORK") -> TaskSpec:
    return TaskSpec("t", "p", frozenset(required), kind=kind)


def choose(
    task: TaskSpec, agents: list[EnlistedAgent], exclude: frozenset[str] = frozenset(), mission_id: str = ""
) -> tuple[EnlistedAgent, float] | None:
    """Routing over these agents, indexed as the coordinator's state keeps them."""
    by_id = {each.agent_id: each for each in agents}
    return routing.choose(task, IdleAgents.of(agents), by_id, exclude, mission_id)


def scan(
    task: TaskSpec, agents: list[EnlistedAgent], exclude: frozenset[str], mission_id: str
) -> tuple[EnlistedAgent, float] | None:
    """The rule routing implements, as a scan of every agent: the reference the index must agree with."""
    eligible = [
        (score(task.required_capabilities, each.capabilities), each)
        for each in agents
        if each.available
        and each.agent_id not in exclude
        and routing.capable(task, each.capabilities)
        and not routing.holds(each, mission_id, task.task_id)
    ]
    if not eligible:
        return None
    value, best = min(eligible, key=lambda pair: (-pair[0], pair[1].load, pair[1].agent_id))
    return best, value


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


CAPABILITIES = ["code", "review", "test", "decision_making"]


@st.composite
def swarms(draw: st.DrawFn) -> list[EnlistedAgent]:
    """Agents of a few capability sets, loads and states, some holding replicas of the routed task."""
    agents = []
    for index in range(draw(st.integers(0, 12))):
        held = draw(
            st.lists(st.sampled_from([("m", "t", 0), ("m", "t", 1), ("m", "u", 0), ("n", "t", 0)]), unique=True)
        )
        agents.append(
            agent(
                f"a{index}",
                *draw(st.lists(st.sampled_from(CAPABILITIES), unique=True)),
                load=draw(st.integers(0, 3)),
                capacity=draw(st.integers(1, 3)),
                tasks=frozenset(held),
                alive=draw(st.booleans()) or draw(st.booleans()),
                throttled=not draw(st.integers(0, 4)),
            )
        )
    return agents


@given(
    swarms(),
    st.lists(st.sampled_from(CAPABILITIES), unique=True),
    st.sampled_from(["WORK", "FINAL"]),
    st.sets(st.sampled_from([f"a{i}" for i in range(12)])),
)
def test_the_index_chooses_what_a_scan_of_every_agent_would(agents, required, kind, exclude):
    task = spec(*required, kind=kind)
    assert choose(task, agents, frozenset(exclude), "m") == scan(task, agents, frozenset(exclude), "m")


CHANGES = st.tuples(st.integers(0, 11), st.integers(0, 3), st.booleans(), st.frozensets(st.sampled_from(CAPABILITIES)))


@given(swarms(), st.lists(CHANGES))
def test_the_index_follows_every_change_of_an_agent_and_survives_a_pickle(agents, changes):
    idle, by_id = IdleAgents.of(agents), {each.agent_id: each for each in agents}
    for index, load, alive, capabilities in changes:
        changed = EnlistedAgent(f"a{index}", "eu", 0, capabilities, alive=alive, load=load)
        by_id[changed.agent_id], idle = changed, idle.put(changed)
    expected = IdleAgents.of(by_id.values())
    for each in (idle, pickle.loads(pickle.dumps(idle))):
        assert each == {agent_id for agent_id, known in by_id.items() if known.available}
        assert _grouped(each) == _grouped(expected)


def _grouped(idle: IdleAgents) -> dict[frozenset[str], list[tuple[int, str]]]:
    return {capabilities: list(members) for capabilities, members in idle.groups()}
