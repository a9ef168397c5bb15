"""Retirement, given/when/then: an ended mission leaves the live state after the retention, and stays a duplicate."""

from swarmlog.coordinator.state import RETAIN_ENDED_MS
from swarmlog.replay.components import COMPONENTS
from swarmlog.schemas.records import MissionCompleted, MissionRetired, TaskAssigned

from .conformance import assert_conforms
from .harness import Swarm, named, task


def _completed(swarm: Swarm, mission_id: str) -> None:
    """A one-task mission run to its end."""
    [assigned] = named(swarm.submit(mission_id, [task("t", "code")]), TaskAssigned)
    swarm.started(assigned)
    assert named(swarm.complete(assigned, "done"), MissionCompleted)


def test_an_ended_mission_is_retired_after_the_retention_and_a_resubmission_stays_a_duplicate():
    swarm = Swarm()
    swarm.register("c1", "code")
    _completed(swarm, "m")
    assert swarm.tick(RETAIN_ENDED_MS - 1) == []
    [retired] = swarm.tick(1)
    assert_conforms(retired)
    assert isinstance(retired, MissionRetired) and retired.mission_id == "m"
    assert "m" not in swarm.state.missions and "m" in swarm.state.retired
    assert swarm.submit("m", [task("t", "code")]) == []
    assert swarm.tick(10 * RETAIN_ENDED_MS) == []
    assert swarm.replay() == swarm.state


def test_live_state_stays_bounded_over_many_missions():
    swarm = Swarm()
    swarm.register("c1", "code")
    for index in range(50):
        _completed(swarm, f"m{index}")
        swarm.tick(RETAIN_ENDED_MS // 10)
    assert len(swarm.state.missions) <= 10 and len(swarm.state.retired) >= 40
    assert swarm.replay() == swarm.state


def test_the_mission_view_of_replay_keeps_a_retired_mission():
    swarm = Swarm()
    swarm.register("c1", "code")
    _completed(swarm, "m")
    swarm.tick(RETAIN_ENDED_MS)
    view = COMPONENTS["mission"]
    state = view.fold(view.start("m", (swarm.state.config.region,)), swarm.journal)
    assert view.view(state, "m")["mission"]["phase"] == "COMPLETED"
