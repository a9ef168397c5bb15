"""Breaking a wait-for cycle: abort its youngest wait (the latest start; ties go to the larger wait id)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.draft import Draft
from swarmlog.schemas.events import to_millis


def on_detected(draft: Draft, data: Mapping[str, Any]) -> Rejected | None:
    """DeadlockBroken and an error PeerAnswered to the youngest wait's waiter, when that waiter is this region's."""
    cycle, wait_ids, started = list(data["cycle"]), list(data["wait_ids"]), list(data["waits_started_at"])
    if not cycle or not len(wait_ids) == len(started) == len(cycle):
        return Rejected(f"DeadlockDetected needs one wait id and start per agent of its cycle; got {cycle}, "
                        f"{wait_ids} and {started}")
    if draft.state.broken_waits.intersection(wait_ids):
        return None
    youngest = max(range(len(cycle)), key=lambda index: (to_millis(started[index]), wait_ids[index]))
    waiter, waited_for, wait_id = cycle[youngest], cycle[(youngest + 1) % len(cycle)], wait_ids[youngest]
    agent = draft.state.agents.get(waiter)
    if agent is None:
        return None
    mission_id = agent.task[0] if agent.task else None
    draft.emit("DeadlockBroken", mission_id, cycle=cycle, wait_id=wait_id, waiter_agent_id=waiter,
               mission_id=mission_id)
    loop = " -> ".join([*cycle, cycle[0]])
    draft.emit("PeerAnswered", mission_id, question_id=wait_id, from_agent_id=waited_for, to_agent_id=waiter,
               answer=None, error=f"deadlock: your wait {wait_id} was aborted to break the cycle {loop}; "
                                  "continue without this answer")
    return None
