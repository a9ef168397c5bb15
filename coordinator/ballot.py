"""Opening a ballot (the mission's, or a task's cross-check): one VoteRequested per voter, within the window."""

from __future__ import annotations

from collections.abc import Sequence

from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import MissionState
from swarmlog.schemas import records
from swarmlog.schemas.records import VoteRequested


def ask_voters(
    draft: Draft, mission: MissionState, ballot_id: str, candidates: Sequence[records.Candidate], voters: Sequence[str]
) -> None:
    """Ask each voter, at its inbox slot, to choose among the candidates before the mission's consensus window ends."""
    deadline = draft.now_ms + mission.consensus.window_ms
    for voter in voters:
        draft.emit(
            VoteRequested,
            mission.mission_id,
            mission_id=mission.mission_id,
            ballot_id=ballot_id,
            voter_agent_id=voter,
            slot=draft.state.agents[voter].slot,
            candidates=list(candidates),
            deadline_at=deadline,
        )
