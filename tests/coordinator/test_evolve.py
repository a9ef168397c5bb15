"""evolve is total: kinds it does not journal and events about unknown missions or agents change nothing."""

from swarmlog.coordinator import INITIAL, evolve
from swarmlog.schemas.records import AgentDelisted, PeerAnswered, TaskAssigned, VoteRecorded

from .harness import Swarm, make, task


def test_other_kinds_and_unknown_subjects_change_nothing():
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.submit("m", [task("t", "code")])
    state = swarm.state
    for event in [
        make(PeerAnswered, question_id="q", from_agent_id="a", to_agent_id="b", answer="42"),
        make(
            TaskAssigned,
            mission_id="other",
            task_id="t",
            replica=0,
            attempt=1,
            agent_id="a",
            slot=0,
            score=1.0,
            prompt="p",
        ),
        make(AgentDelisted, agent_id="nobody", reason="?"),
    ]:
        assert evolve(state, event) is state
    vote = make(VoteRecorded, mission_id="m", ballot_id="m/ballot", voter_agent_id="a", candidate_id="t/0")
    assert evolve(INITIAL, vote) is INITIAL
