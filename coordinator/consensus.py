"""Phase 2 as data: the ballot's candidates and voters, the tally, and when it is decided."""

from __future__ import annotations

from swarmlog.coordinator.state import AGREED, DONE, BallotTally, Candidate, ConsensusSpec, MissionState, TaskSpec


def _work(mission: MissionState) -> list[TaskSpec]:
    """The mission's WORK specs in plan order."""
    return [spec for spec in mission.tasks.values() if spec.kind == "WORK"]


def _outputs(mission: MissionState, specs: list[TaskSpec]) -> list[tuple[str, int, str, str]]:
    """(task_id, replica, agent_id, output) of every succeeded replica of these specs, in plan then replica order."""
    found = []
    for spec in specs:
        for index in range(spec.replicas):
            replica = mission.replica(spec.task_id, index)
            if replica.status == DONE:
                found.append((spec.task_id, index, replica.agent_id or "", replica.output or ""))
    return found


def leaves(mission: MissionState) -> list[TaskSpec]:
    """The mission's WORK specs no other task depends on, in plan order."""
    work = _work(mission)
    depended_on = {dep for spec in work for dep in spec.depends_on}
    return [spec for spec in work if spec.task_id not in depended_on]


def question(mission: MissionState) -> str:
    """What the mission's ballot asks: its one leaf task's prompt, else its title and each leaf task's prompt."""
    specs = leaves(mission)
    if len(specs) == 1:
        return specs[0].prompt
    return "\n".join([mission.title, *(f"{spec.task_id}: {spec.prompt}" for spec in specs)])


def candidates(mission: MissionState) -> tuple[Candidate, ...]:
    """The distinct outputs the leaf tasks give (see `_given`), each named after the first replica that gave it."""
    chosen: dict[str, Candidate] = {}
    for task_id, index, agent_id, output in _given(mission, leaves(mission)):
        chosen.setdefault(output, Candidate(f"{task_id}/{index}", agent_id, output))
    return tuple(chosen.values())


def _given(mission: MissionState, specs: list[TaskSpec]) -> list[tuple[str, int, str, str]]:
    """The outputs these tasks put on the ballot: an agreed task its chosen replica's; a disputed one its chosen
    replica's first, then its other replicas' (the ballot settles what the cross-check could not); any other task
    every succeeded replica's."""
    given = []
    for spec in specs:
        outputs = _outputs(mission, [spec])
        check = mission.checks.get(spec.task_id)
        if check is not None and check.replica is not None:
            chosen = [found for found in outputs if found[1] == check.replica]
            outputs = (
                chosen if check.outcome == AGREED else chosen + [found for found in outputs if found not in chosen]
            )
        given += outputs
    return given


def voters(mission: MissionState) -> tuple[str, ...]:
    """The agents that produced outputs in the WORK phase, in order of first output."""
    return tuple(dict.fromkeys(agent_id for _, _, agent_id, _ in _outputs(mission, _work(mission))))


def leader(ballot: BallotTally, strategy: str) -> tuple[Candidate, float] | None:
    """The candidate with the most (confidence-weighted) votes and its share; ties go to the earlier candidate."""
    if not ballot.votes:
        return None
    weights = {candidate.candidate_id: 0.0 for candidate in ballot.candidates}
    for candidate_id, confidence in ballot.votes.values():
        weights[candidate_id] += max(confidence, 0.0) if strategy == "CONFIDENCE_WEIGHTED" else 1.0
    best = max(ballot.candidates, key=lambda candidate: weights[candidate.candidate_id])
    total = sum(weights.values())
    return best, (weights[best.candidate_id] / total if total else 0.0)


def decided(ballot: BallotTally, spec: ConsensusSpec) -> bool:
    """Whether the ballot can close now: every voter voted, or a quorum voted and the leader has a majority."""
    if len(ballot.votes) == len(ballot.voters):
        return True
    lead = leader(ballot, spec.strategy)
    return lead is not None and len(ballot.votes) >= spec.quorum * len(ballot.voters) and lead[1] > 0.5
