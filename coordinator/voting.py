"""Phase 2 as events: open the ballot, record votes, and close it as reached or timed out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmlog.coordinator import consensus
from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.draft import Draft, from_millis
from swarmlog.coordinator.state import Mission


def open_ballot(draft: Draft, mission: Mission) -> None:
    """Ask every voter to choose among the candidates; a single candidate is reached at once."""
    candidates = consensus.candidates(mission)
    voters = consensus.voters(mission)
    ballot_id = f"{mission.mission_id}/ballot"
    if len(candidates) == 1:
        draft.emit(
            "ConsensusReached",
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
    records = [{"candidate_id": c.candidate_id, "agent_id": c.agent_id, "output": c.output} for c in candidates]
    deadline = from_millis(draft.now_ms + mission.consensus.window_ms)
    for voter in voters:
        draft.emit(
            "VoteRequested",
            mission.mission_id,
            mission_id=mission.mission_id,
            ballot_id=ballot_id,
            voter_agent_id=voter,
            slot=draft.state.agents[voter].slot,
            candidates=records,
            deadline_at=deadline,
        )


def on_vote_cast(draft: Draft, data: Mapping[str, Any]) -> Rejected | None:
    """Record a voter's first vote on the open ballot, and reach consensus once it is decided."""
    mission = draft.state.missions.get(data["mission_id"])
    if mission is None or mission.ballot is None or mission.decision is not None or not mission.active:
        return None
    ballot, voter = mission.ballot, data["voter_agent_id"]
    if data["ballot_id"] != ballot.ballot_id or voter not in ballot.voters:
        return Rejected(f"{voter} has no vote in ballot {data['ballot_id']} (open: {ballot.ballot_id})")
    if data["candidate_id"] not in {candidate.candidate_id for candidate in ballot.candidates}:
        return Rejected(f"ballot {ballot.ballot_id} has no candidate {data['candidate_id']!r}")
    if voter in ballot.votes:
        return None
    draft.emit(
        "VoteRecorded",
        mission.mission_id,
        mission_id=mission.mission_id,
        ballot_id=ballot.ballot_id,
        voter_agent_id=voter,
        candidate_id=data["candidate_id"],
        confidence=data.get("confidence", 1.0),
    )
    mission = draft.state.missions[mission.mission_id]
    ballot = mission.ballot
    lead = consensus.leader(ballot, mission.consensus.strategy)
    if lead is not None and consensus.decided(ballot, mission.consensus):
        winner, support = lead
        draft.emit(
            "ConsensusReached",
            mission.mission_id,
            mission_id=mission.mission_id,
            ballot_id=ballot.ballot_id,
            candidate_id=winner.candidate_id,
            output=winner.output,
            support=support,
            votes=len(ballot.votes),
            voters=len(ballot.voters),
            strategy=mission.consensus.strategy,
            consensus_ms=draft.now_ms - ballot.opened_at,
        )
    return None


def close_if_expired(draft: Draft, mission: Mission) -> None:
    """Time the ballot out once its window has passed: the leader proceeds, or the first candidate if no vote came."""
    ballot = mission.ballot
    if ballot is None or mission.decision is not None or draft.now_ms < ballot.deadline_at:
        return
    lead = consensus.leader(ballot, mission.consensus.strategy)
    chosen = lead[0] if lead else ballot.candidates[0]
    draft.emit(
        "ConsensusTimedOut",
        mission.mission_id,
        mission_id=mission.mission_id,
        ballot_id=ballot.ballot_id,
        votes=len(ballot.votes),
        voters=len(ballot.voters),
        candidate_id=lead[0].candidate_id if lead else None,
        output=chosen.output,
        consensus_ms=draft.now_ms - ballot.opened_at,
    )
