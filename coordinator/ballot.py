"""Opening a ballot (the mission's, or a task's cross-check): one VoteRequested per voter, within the window."""

from __future__ import annotations

from collections.abc import Sequence

from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import MissionState
from swarmlog.schemas import records
from swarmlog.schemas.records import VoteRequested

MAX_QUESTION = 4000
"""Characters of the question a VoteRequested carries; a longer one is cut, saying so (its candidates already fill
most of a voter's prompt)."""


def ask_voters(
    draft: Draft,
    mission: MissionState,
    ballot_id: str,
    question: str,
    candidates: Sequence[records.Candidate],
    voters: Sequence[str],
) -> None:
    """Ask each voter, at its inbox slot, which of the candidates best answers `question` before the mission's
    consensus window ends."""
    shown = (
        question if len(question) <= MAX_QUESTION else f"{question[:MAX_QUESTION]} [cut: {len(question)} characters]"
    )
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
            question=shown,
        )
