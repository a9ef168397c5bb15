"""PROGRESS: a mission's progress as one pure fold of the coordinator's journal."""

from __future__ import annotations

from swarmlog.coordinator import PROJECTION
from swarmlog.coordinator.progress import PROGRESS, REJECTED
from swarmlog.schemas.records import MissionCompleted, MissionRejected, VoteRequested
from swarmlog.topics import JOURNAL

from .harness import Swarm, named, task


def three_phase() -> Swarm:
    """Two replicas answer, the voters pick one, the decider ships it."""
    swarm = Swarm()
    for agent_id in ("a1", "a2", "a3"):
        swarm.register(agent_id, "code")
    swarm.register("boss", "decision_making")
    swarm.submit("m", [task("gen", "code", replicas=2)], final_action={"prompt": "ship", "required_capabilities": []})
    for assigned in swarm.running():
        swarm.started(assigned)
        swarm.complete(assigned, "v1", tokens=12)
    requests = named(swarm.journal, VoteRequested)
    for request in requests:
        swarm.vote(request, requests[0].candidates[0].candidate_id)
    [final] = swarm.running()
    swarm.started(final)
    swarm.complete(final, "shipped", tokens=4)
    return swarm


def test_both_projections_fold_the_journal():
    assert PROGRESS.topics == PROJECTION.topics == (JOURNAL,)


def test_a_mission_s_progress_is_folded_from_its_journal_events_to_its_end():
    swarm = three_phase()
    progress = PROGRESS.rebuild("m", swarm.journal)
    [completed] = named(swarm.journal, MissionCompleted)
    assert (progress.title, progress.phase, progress.planned, progress.result) == ("m", "COMPLETED", 2, completed)
    assert progress.succeeded and progress.votes == len(named(swarm.journal, VoteRequested))
    assert sum(progress.done.values()) == 3 and progress.failed == {}
    assert progress.tokens == completed.tokens_used
    assert progress.consensus is not None and progress.consensus.startswith("reached on")


def test_another_mission_s_events_change_nothing_and_nothing_is_changed_in_place():
    swarm = three_phase()
    start = PROGRESS.initial("other")
    assert PROGRESS.fold(start, swarm.journal) is start
    midway = PROGRESS.rebuild("m", swarm.journal[:-1])
    before = midway.summary()
    PROGRESS.evolve(midway, swarm.journal[-1])
    assert midway.summary() == before


def test_a_rejected_mission_is_rejected_not_failed():
    swarm = Swarm()
    [rejected] = swarm.submit("m", [task("a", depends_on=["b"])])
    progress = PROGRESS.rebuild("m", swarm.journal)
    assert isinstance(rejected, MissionRejected)
    assert (progress.phase, progress.result, progress.succeeded) == (REJECTED, rejected, False)


def test_a_task_s_cross_checks_show_in_its_progress():
    swarm = Swarm()
    for agent_id in ("a1", "a2", "a3"):
        swarm.register(agent_id, "code")
    swarm.submit("m", [task("gen", "code", replicas=2)])
    for assigned, output in zip(sorted(swarm.running(), key=lambda a: a.replica), ("x", "y"), strict=True):
        swarm.complete(assigned, output)
    progress = PROGRESS.rebuild("m", swarm.journal)
    assert (progress.checks, progress.planned) == ({"gen": "split 1/2: tie-breaker replica 2"}, 3)
    [tie_breaker] = swarm.running()
    swarm.complete(tie_breaker, " X ")
    progress = PROGRESS.rebuild("m", swarm.journal)
    assert progress.summary()["checks"] == {"gen": "agreed 2/3 on replica 0"}
