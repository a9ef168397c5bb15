"""Cross-checking by ballot, given/when/then: a VOTE task's outputs chosen by the agents that gave them, a JUDGE task's
by one agent with the judge capability; unanimous outputs need no ballot; windows, late and foreign votes; replay."""

from __future__ import annotations

from swarmlog.coordinator import Decision, Receive, decide
from swarmlog.coordinator.ballot import MAX_QUESTION
from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.plan import from_record, problem
from swarmlog.coordinator.progress import cross_check
from swarmlog.schemas import records
from swarmlog.schemas.records import (
    MissionRejected,
    TaskAssigned,
    TaskCrossChecked,
    VoteCast,
    VoteRecorded,
    VoteRequested,
)

from .conformance import assert_conforms
from .harness import Swarm, named, task

WINDOW = {"strategy": "MAJORITY", "window_ms": 1000, "quorum": 0.5}


def swarm_with(check: str, *agents: str, judge: str | None = None, judges: tuple[str, ...] = (), **fields) -> Swarm:
    """A swarm of `code` agents (and `judges` with capability `judge`) running mission m: task t on three replicas
    cross-checked by `check`, and u on its output."""
    swarm = Swarm()
    for agent_id in agents:
        swarm.register(agent_id, "code")
    for agent_id in judges:
        swarm.register(agent_id, "judge")
    checked = task("t", "code", replicas=3) | {"check": check, "judge": judge}
    swarm.submit("m", [checked, task("u", "code", depends_on=["t"])], **fields)
    return swarm


def answer(swarm: Swarm, *outputs: str) -> list:
    """Task t's running replicas answer in replica order; the events they caused."""
    running = sorted((a for a in swarm.running() if a.task_id == "t"), key=lambda a: a.replica)
    assert len(running) == len(outputs)
    return [event for a, output in zip(running, outputs, strict=True) for event in swarm.complete(a, output)]


def checks(swarm: Swarm) -> list[tuple]:
    """(rule, outcome, chosen replica, support, votes, ballot, timed out) of every TaskCrossChecked journaled."""
    return [
        (c.rule, c.outcome, c.replica, c.support, c.votes, c.ballot_id, c.timed_out)
        for c in named(swarm.journal, TaskCrossChecked)
    ]


def downstream(swarm: Swarm) -> list[TaskAssigned]:
    """The assignments of task u."""
    return [a for a in named(swarm.journal, TaskAssigned) if a.task_id == "u"]


def test_a_vote_task_whose_outputs_differ_asks_the_agents_that_gave_them_and_takes_the_majority_s_choice():
    swarm = swarm_with("VOTE", "a", "b", "c", "d")
    requests = named(answer(swarm, "Paris", "Lyon", "the capital is Paris"), VoteRequested)
    assert checks(swarm) == [("VOTE", "BALLOT", None, 1, 0, "m/t/ballot", False)]
    assert [r.voter_agent_id for r in requests] == ["a", "b", "c"]
    assert [(c.candidate_id, c.output) for c in requests[0].candidates] == [
        ("t/0", "Paris"),
        ("t/1", "Lyon"),
        ("t/2", "the capital is Paris"),
    ]
    assert {r.question for r in requests} == {"do t"}  # the voters see the task's prompt
    assert downstream(swarm) == []  # not settled while the ballot is open
    swarm.vote(requests[0], "t/2")
    assert checks(swarm)[-1][1] == "BALLOT"
    swarm.vote(requests[2], "t/2")  # a quorum with a majority decides it
    assert checks(swarm)[-1] == ("VOTE", "AGREED", 2, 2, 2, "m/t/ballot", False)
    [assigned] = downstream(swarm)
    assert assigned.inputs == {"t": "the capital is Paris"}
    assert swarm.vote(requests[1], "t/1") == []  # the ballot is closed: a late vote changes nothing
    for event in swarm.journal:
        assert_conforms(event)
    assert swarm.replay() == swarm.state


def test_unanimous_outputs_are_agreed_without_a_ballot():
    swarm = swarm_with("VOTE", "a", "b", "c", "d")
    events = answer(swarm, "Paris", " paris", "PARIS")
    assert named(events, VoteRequested) == []
    assert checks(swarm) == [("VOTE", "AGREED", 0, 3, 0, None, False)]


def test_a_judge_task_asks_one_judge_that_did_not_work_on_it_and_takes_its_verdict():
    swarm = swarm_with("JUDGE", "a", "b", "c", judge="judge", judges=("j1", "j2"))
    requests = named(answer(swarm, "41", "42", "41"), VoteRequested)
    assert [r.voter_agent_id for r in requests] == ["j1"]
    assert [c.candidate_id for c in requests[0].candidates] == ["t/0", "t/1"]
    swarm.vote(requests[0], "t/1")  # the judge overrules the majority
    assert checks(swarm)[-1] == ("JUDGE", "AGREED", 1, 1, 1, "m/t/ballot", False)
    assert downstream(swarm)[0].inputs == {"t": "42"}
    assert swarm.replay() == swarm.state


def test_without_a_judge_alive_the_task_falls_back_to_the_majority_of_its_outputs():
    swarm = swarm_with("JUDGE", "a", "b", "c", "d", judge="judge")
    events = answer(swarm, "41", "42", "41")
    assert named(events, VoteRequested) == []
    assert checks(swarm) == [("JUDGE", "AGREED", 0, 2, 0, None, False)]


def test_a_ballot_whose_window_passes_without_votes_leaves_the_task_disputed_on_the_largest_group():
    swarm = swarm_with("VOTE", "a", "b", "c", "d", consensus=WINDOW)
    answer(swarm, "x", "y", "y")
    assert swarm.tick(999) == []
    swarm.tick(1)
    assert checks(swarm)[-1] == ("VOTE", "DISPUTED", 1, 0, 0, "m/t/ballot", True)
    assert downstream(swarm)[0].inputs == {"t": "y"}
    assert swarm.replay() == swarm.state


def test_a_split_ballot_past_its_window_is_disputed_on_its_leader():
    swarm = swarm_with("VOTE", "a", "b", "c", "d", consensus=WINDOW)
    requests = named(answer(swarm, "x", "y", "z"), VoteRequested)
    swarm.vote(requests[0], "t/2")
    swarm.tick(1000)
    assert checks(swarm)[-1] == ("VOTE", "AGREED", 2, 1, 1, "m/t/ballot", True)  # the one vote is all that came
    swarm2 = swarm_with("VOTE", "a", "b", "c", "d", consensus=WINDOW)
    requests = named(answer(swarm2, "x", "y", "z"), VoteRequested)
    swarm2.vote(requests[0], "t/2")
    swarm2.vote(requests[1], "t/1")
    swarm2.tick(1000)
    assert checks(swarm2)[-1] == ("VOTE", "DISPUTED", 1, 1, 2, "m/t/ballot", True)  # a tie: the earlier candidate


def test_a_vote_from_an_agent_not_asked_or_for_no_candidate_is_rejected_and_not_recorded():
    swarm = swarm_with("VOTE", "a", "b", "c", "d")
    [request, *_] = named(answer(swarm, "x", "y", "y"), VoteRequested)

    def cast(voter: str, candidate_id: str) -> Decision | Rejected:
        fields = {"voter_agent_id": voter, "candidate_id": candidate_id, "confidence": 1.0, "reason": None}
        vote = swarm.input(VoteCast, mission_id="m", ballot_id=request.ballot_id, **fields)
        return decide(Receive(vote, swarm.now_ms), swarm.state)

    assert cast("d", "t/0") == Rejected("d has no vote in ballot m/t/ballot (open: m/t/ballot)")
    assert cast("a", "t/9") == Rejected("ballot m/t/ballot has no candidate 't/9'")
    assert named(swarm.journal, VoteRecorded) == []


def test_the_plan_rules_refuse_a_judge_task_without_a_judge_capability_and_an_unknown_rule():
    def spec(**fields):
        return from_record(records.TaskSpec(task_id="t", prompt="p", **fields))

    assert "needs judge" in (problem([spec(check="JUDGE")]) or "")
    assert "needs judge" in (problem([spec(judge="reviewer")]) or "")
    assert problem([spec(check="JUDGE", judge="reviewer")]) is None
    swarm = Swarm()
    swarm.submit("m", [task("t", "code", replicas=2) | {"check": "JUDGE"}])
    [rejected] = named(swarm.journal, MissionRejected)
    assert "check JUDGE needs judge" in rejected.reason


def test_the_timeline_says_how_a_ballot_settled_the_task():
    swarm = swarm_with("VOTE", "a", "b", "c", "d")
    requests = named(answer(swarm, "x", "y", "y"), VoteRequested)
    swarm.vote(requests[1], "t/1")
    swarm.vote(requests[2], "t/1")
    said = [cross_check(event) for event in named(swarm.journal, TaskCrossChecked)]
    assert said == ["split 2/3: vote ballot opened", "agreed by vote, 2/2 votes: replica 1"]


def test_a_ballot_s_question_longer_than_the_limit_is_cut_saying_so():
    swarm = Swarm()
    for agent_id in "abc":
        swarm.register(agent_id, "code")
    long_prompt = "x" * (MAX_QUESTION + 10)
    swarm.submit("m", [task("t", "code", replicas=3) | {"check": "VOTE", "prompt": long_prompt}])
    [request, *_] = named(answer(swarm, "1", "2", "3"), VoteRequested)
    assert request.question == f"{'x' * MAX_QUESTION} [cut: {MAX_QUESTION + 10} characters]"
    assert_conforms(request)
