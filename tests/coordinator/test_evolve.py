"""evolve is total: unknown kinds and events about unknown missions or agents change nothing."""

from swarmlog.coordinator import INITIAL, evolve
from swarmlog.schemas.events import Event

from .harness import Swarm, task


def test_unknown_kinds_and_unknown_subjects_change_nothing():
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.submit("m", [task("t", "code")])
    state = swarm.state
    for event in [
        Event("SomethingNew", {}),
        Event("TaskAssigned", {"mission_id": "other"}),
        Event("AgentDelisted", {"agent_id": "nobody", "reason": "?"}),
        Event("PeerAnswered", {}),
    ]:
        assert evolve(state, event) is state
    assert evolve(INITIAL, Event("VoteRecorded", {"mission_id": "m"})) is INITIAL
