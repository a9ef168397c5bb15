"""A decision holds about Config.max_routed_bytes of routing events (an unrouted one none); ticks route the ready
replicas it left."""

from swarmlog.coordinator import Receive, decide_unrouted
from swarmlog.coordinator.dispatch import ROUTING_EVENT_BYTES
from swarmlog.coordinator.state import PENDING
from swarmlog.schemas.records import (
    MissionAccepted,
    MissionCompleted,
    MissionSubmitted,
    PhaseStarted,
    TaskAssigned,
    TaskQueued,
)

from .harness import Swarm, named, task

BUDGET = 8 * ROUTING_EVENT_BYTES
"""Room for about 8 routing events a decision."""


def routed(events: list) -> list:
    """The routing events (assignments and queue entries) among events."""
    return [event for event in events if isinstance(event, TaskAssigned | TaskQueued)]


def unrouted(swarm: Swarm) -> int:
    """How many replicas of mission m wait for routing."""
    mission = swarm.state.missions["m"]
    return sum(mission.replica(task_id, 0).status == PENDING for task_id in mission.tasks)


def test_a_mission_larger_than_a_decision_is_routed_over_the_next_ticks_and_completes():
    swarm = Swarm(max_routed_bytes=BUDGET)
    for index in range(3):
        swarm.register(f"a{index}", "code")
    accepted = routed(swarm.submit("m", [task(f"t{index}", "code") for index in range(40)]))
    assert 3 <= len(accepted) <= 9, "the acceptance routes what fits, idle agents first"
    assert len(named(accepted, TaskAssigned)) == 3
    assert unrouted(swarm) == 40 - len(accepted)

    ticks = 0
    while unrouted(swarm):
        tick = routed(swarm.tick(250))
        assert 1 <= len(tick) <= 9, "each tick routes another decision's worth"
        ticks += 1
    assert ticks >= 3
    assert len({(e.task_id, e.replica) for e in routed(swarm.journal)}) == 40, "every replica routed, none twice"

    while swarm.running():
        for assigned in swarm.running():
            swarm.complete(assigned, "ok")  # one candidate: consensus at once
        swarm.tick(250)
    [done] = named(swarm.journal, MissionCompleted)
    assert done.tasks_completed == 40
    assert sorted(e.task_id for e in named(swarm.journal, TaskAssigned)) == sorted(f"t{i}" for i in range(40))
    assert swarm.replay() == swarm.state


def test_a_tick_routes_nothing_while_every_ready_replica_is_routed():
    swarm = Swarm(max_routed_bytes=BUDGET)
    swarm.register("a", "code")
    swarm.submit("m", [task("first", "code"), task("second", "code", depends_on=["first"])])
    assert swarm.tick(250) == [], "the dependent task waits for its dependency, not for a tick"


def test_an_assignment_larger_than_the_budget_is_still_routed_alone():
    swarm = Swarm(max_routed_bytes=1)
    swarm.register("a", "code")
    swarm.register("b", "code")
    big = task("big", "code") | {"prompt": "x" * 10_000}
    events = swarm.submit("m", [big, task("small", "code")])
    assert [e.task_id for e in routed(events)] == ["big"], "one routing event a decision at the least"
    assert [e.task_id for e in routed(swarm.tick(250))] == ["small"]


def test_an_unrouted_decision_accepts_with_agents_idle_and_the_next_tick_routes():
    swarm = Swarm(max_routed_bytes=BUDGET)
    swarm.register("a", "code")
    submitted = swarm.input(MissionSubmitted, mission_id="m", title="m", tasks=[task("t", "code")], submitted_by="test")
    config = swarm.state.config
    accepted = swarm.apply(Receive(submitted, swarm.now_ms), decide_unrouted)
    assert [type(event) for event in accepted] == [MissionAccepted, PhaseStarted]
    assert swarm.state.config == config, "the routing budget is the coordinator's again"
    assert unrouted(swarm) == 1
    assert [e.agent_id for e in named(swarm.tick(250), TaskAssigned)] == ["a"]
    assert swarm.replay() == swarm.state
