"""Breaking a wait-for cycle: abort its youngest wait (the latest start; ties go to the larger wait id)."""

from __future__ import annotations

from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.draft import Draft
from swarmlog.schemas.records import DeadlockBroken, DeadlockDetected, PeerAnswered


def on_detected(draft: Draft, detected: DeadlockDetected) -> Rejected | None:
    """DeadlockBroken for the youngest wait, when its waiter is this region's (`answer` tells the waiter)."""
    cycle, wait_ids, started = list(detected.cycle), list(detected.wait_ids), list(detected.waits_started_at)
    if not cycle or not len(wait_ids) == len(started) == len(cycle):
        return Rejected(
            f"DeadlockDetected needs one wait id and start per agent of its cycle; got {cycle}, "
            f"{wait_ids} and {started}"
        )
    if draft.state.broken_waits.intersection(wait_ids):
        return None
    youngest = max(range(len(cycle)), key=lambda index: (started[index], wait_ids[index]))
    waiter, wait_id = cycle[youngest], wait_ids[youngest]
    agent = draft.state.agents.get(waiter)
    if agent is None:
        return None
    missions = {key[0] for key in agent.tasks}
    mission_id = missions.pop() if len(missions) == 1 else None  # an agent running several missions' tasks names none
    draft.emit(DeadlockBroken, mission_id, cycle=cycle, wait_id=wait_id, waiter_agent_id=waiter, mission_id=mission_id)
    return None


def answer(broken: DeadlockBroken) -> PeerAnswered:
    """The error PeerAnswered that a DeadlockBroken sends its waiter (id and envelope derived from it)."""
    cycle, waiter, wait_id = list(broken.cycle), broken.waiter_agent_id, broken.wait_id
    loop = " -> ".join([*cycle, cycle[0]])
    return PeerAnswered(
        event_id=f"{broken.event_id}/answer",
        occurred_at=broken.occurred_at,
        correlation_id=broken.correlation_id,
        causation_id=broken.event_id,
        producer=broken.producer,
        question_id=wait_id,
        from_agent_id=cycle[(cycle.index(waiter) + 1) % len(cycle)],
        to_agent_id=waiter,
        answer=None,
        error=f"deadlock: your wait {wait_id} was aborted to break the cycle {loop}; continue without this answer",
    )
