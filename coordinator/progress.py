"""A mission's progress as its journal tells it: phase, replicas planned, assigned and queued, results per agent,
tokens, each replicated task's cross-check, votes, consensus and how it ended; `PROGRESS` is the one fold of it (the client's `watch`, replay's timeline).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, TypeAlias

from swarmlog import topics
from swarmlog.coordinator.state import ACCEPTED, COMPLETED, MISSION_FAILED
from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import (
    ConsensusReached,
    ConsensusTimedOut,
    MissionAccepted,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    PhaseStarted,
    TaskAssigned,
    TaskCrossChecked,
    TaskQueued,
    TaskResultRecorded,
    VoteRecorded,
)

# A mission's phases before and outside the coordinator's own (ACCEPTED, the schema's MissionPhase, COMPLETED, FAILED).
SUBMITTED = "SUBMITTED"
REJECTED = "REJECTED"

Terminal: TypeAlias = MissionCompleted | MissionFailed | MissionRejected
"""The events a mission ends with."""


@dataclasses.dataclass(frozen=True, slots=True)
class MissionProgress:
    """A mission as its journal events tell it so far: phase, tasks done/failed per agent, consensus, tokens."""

    mission_id: str
    title: str = ""
    phase: str = SUBMITTED
    planned: int = 0
    assigned: int = 0
    queued: int = 0
    done: Mapping[str, int] = dataclasses.field(default_factory=dict)
    failed: Mapping[str, int] = dataclasses.field(default_factory=dict)
    tokens: int = 0
    checks: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """Each replicated task's latest cross-check, as a phrase ("agreed 2/3", "tie-breaker replica 2", ...)."""
    votes: int = 0
    consensus: str | None = None
    result: Terminal | None = None

    @property
    def succeeded(self) -> bool:
        """Whether the mission ended and succeeded."""
        return isinstance(self.result, MissionCompleted) and self.result.success

    def summary(self) -> dict[str, Any]:
        """A JSON-ready view of the progress (its end aside)."""
        return {
            "mission_id": self.mission_id,
            "title": self.title,
            "phase": self.phase,
            "planned": self.planned,
            "assigned": self.assigned,
            "queued": self.queued,
            "done": dict(self.done),
            "failed": dict(self.failed),
            "tokens": self.tokens,
            "checks": dict(self.checks),
            "votes": self.votes,
            "consensus": self.consensus,
        }


def evolve(progress: MissionProgress, event: Event) -> MissionProgress:
    """The progress after one journal event; another mission's events, and kinds that tell no progress, change
    nothing."""
    if event.mission_id != progress.mission_id:
        return progress
    replace = dataclasses.replace
    match event:
        case MissionAccepted():
            planned = sum(task.replicas for task in event.tasks)
            return replace(progress, title=event.title, phase=ACCEPTED, planned=planned)
        case PhaseStarted():
            return replace(progress, phase=event.phase)
        case TaskAssigned():
            return replace(progress, assigned=progress.assigned + 1)
        case TaskQueued():
            return replace(progress, queued=progress.queued + 1)
        case TaskResultRecorded(stale=False, succeeded=True):
            return replace(
                progress, done=_counted(progress.done, event.agent_id), tokens=progress.tokens + event.tokens
            )
        case TaskResultRecorded(stale=False):
            failed = _counted(progress.failed, event.agent_id)
            return replace(progress, failed=failed, tokens=progress.tokens + event.tokens)
        case TaskCrossChecked():
            checks = {**progress.checks, event.task_id: cross_check(event)}
            return replace(progress, checks=checks, planned=progress.planned + (event.tie_breaker is not None))
        case VoteRecorded():
            return replace(progress, votes=progress.votes + 1)
        case ConsensusReached():
            return replace(progress, consensus=f"reached on {event.candidate_id} in {event.consensus_ms} ms")
        case ConsensusTimedOut():
            return replace(progress, consensus=f"timed out with {event.votes}/{event.voters} votes")
        case MissionCompleted() | MissionFailed():
            phase = COMPLETED if isinstance(event, MissionCompleted) else MISSION_FAILED
            return replace(progress, phase=phase, result=event, tokens=event.tokens_used or progress.tokens)
        case MissionRejected():
            return replace(progress, phase=REJECTED, result=event)
    return progress


def cross_check(event: TaskCrossChecked) -> str:
    """A cross-check in a few words: its outcome, the support of the leading output among the replicas compared (or,
    after a ballot, the votes the chosen output got), and whether the consensus window closed it."""
    support = f"{event.support}/{len(event.compared)}"
    if event.ballot_id is not None and event.outcome != "BALLOT":
        votes = f"{event.support}/{event.votes} votes"
        said = f"{'agreed' if event.outcome == 'AGREED' else 'disputed'} by {event.rule.lower()}, {votes}"
        said += f": replica {event.replica}"
    else:
        said = {
            "AGREED": f"agreed {support} on replica {event.replica}",
            "TIE_BREAK": f"split {support}: tie-breaker replica {event.tie_breaker}",
            "BALLOT": f"split {support}: {event.rule.lower()} ballot opened",
            "DISPUTED": f"disputed {support}: replica {event.replica} taken",
        }[event.outcome]
    return f"{said} (window passed)" if event.timed_out else said


def _counted(tally: Mapping[str, int], agent_id: str) -> Mapping[str, int]:
    """The tally with one more for `agent_id`."""
    return {**tally, agent_id: tally.get(agent_id, 0) + 1}


PROGRESS: Projection[str, MissionProgress] = Projection(
    name="progress",
    topics=(topics.JOURNAL,),
    initial=MissionProgress,
    evolve=evolve,
    snapshot_version=1,
)
"""One mission's progress, by mission id: the fold of its journal events (every region's; others' change nothing)."""
