"""Phase 2 as events: open the ballot, record votes, and close it as reached or timed out."""

from __future__ import annotations

from swarmlog.coordinator import consensus, crosscheck
from swarmlog.coordinator.ballot import ask_voters
from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import MissionState, ballot_task, mission_ballot_id
from swarmlog.schemas import records
from swarmlog.schemas.records import ConsensusReached, ConsensusTimedOut, VoteCast, VoteRecorded


def open_ballot(draft: Draft, mission: MissionState) -> None:
    """Ask every voter to choose among the candidates; a single candidate is reached at once."""
    candidates = consensus.candidates(mission)
    voters = consensus.voters(mission)
    ballot_id = mission_ballot_id(mission.mission_id)
    if len(candidates) == 1:
        draft.emit(
            ConsensusReached,
            mission.mission_id,
            mission_id=mission.mission_id,
            ballot_id=ballot_id,
            candidate_id=candidates[0].candidate_id,
            output=candidates[0].output,
            support=1.0,
            votes=0,
            voters=len(voters),
            strategy=mission.consensus.strategy,
            consensus_ms=0,
        )
        return
    ask_voters(
        draft,
        mission,
        ballot_id,
        consensus.question(mission),
        [records.Candidate(c.candidate_id, c.agent_id, c.output) for c in candidates],
        voters,
    )


def on_vote_cast(draft: Draft, vote: VoteCast) -> Rejected | None:
    """Record a voter's first vote on an open ballot (the mission's, or a task's cross-check), and settle the ballot
    once it is decided."""
    mission = draft.state.missions.get(vote.mission_id)
    if mission is None or not mission.active:
        return None
    task_id = ballot_task(mission.mission_id, vote.ballot_id)
    if task_id is not None and task_id in mission.task_ballots:
        if not crosscheck.ballot_open(mission, task_id):
            return None
        ballot = mission.task_ballots[task_id]
    elif mission.ballot is None or mission.decision is not None:
        return None
    else:
        ballot, task_id = mission.ballot, None
    voter = vote.voter_agent_id
    if vote.ballot_id != ballot.ballot_id or voter not in ballot.voters:
        return Rejected(f"{voter} has no vote in ballot {vote.ballot_id} (open: {ballot.ballot_id})")
    if vote.candidate_id not in {candidate.candidate_id for candidate in ballot.candidates}:
        return Rejected(f"ballot {ballot.ballot_id} has no candidate {vote.candidate_id!r}")
    if voter in ballot.votes:
        return None
    draft.emit(
        VoteRecorded,
        mission.mission_id,
        mission_id=mission.mission_id,
        ballot_id=ballot.ballot_id,
        voter_agent_id=voter,
        candidate_id=vote.candidate_id,
        confidence=vote.confidence,
    )
    if task_id is not None:
        crosscheck.on_task_vote(draft, mission.mission_id, task_id)
        return None
    mission = draft.state.missions[mission.mission_id]
    tallied = mission.ballot
    assert tallied is not None, "the VoteRecorded was folded into the open ballot"
    lead = consensus.leader(tallied, mission.consensus.strategy)
    if lead is not None and consensus.decided(tallied, mission.consensus):
        winner, support = lead
        draft.emit(
            ConsensusReached,
            mission.mission_id,
            mission_id=mission.mission_id,
            ballot_id=tallied.ballot_id,
            candidate_id=winner.candidate_id,
            output=winner.output,
            support=support,
            votes=len(tallied.votes),
            voters=len(tallied.voters),
            strategy=mission.consensus.strategy,
            consensus_ms=draft.now_ms - tallied.opened_at,
        )
    return None


def close_if_expired(draft: Draft, mission: MissionState) -> None:
    """Time the ballot out once its window has passed: the leader proceeds, or the first candidate if no vote came."""
    ballot = mission.ballot
    if ballot is None or mission.decision is not None or draft.now_ms < ballot.deadline_at:
        return
    lead = consensus.leader(ballot, mission.consensus.strategy)
    chosen = lead[0] if lead else ballot.candidates[0]
    draft.emit(
        ConsensusTimedOut,
        mission.mission_id,
        mission_id=mission.mission_id,
        ballot_id=ballot.ballot_id,
        votes=len(ballot.votes),
        voters=len(ballot.voters),
        candidate_id=lead[0].candidate_id if lead else None,
        output=chosen.output,
        consensus_ms=draft.now_ms - ballot.opened_at,
    )
