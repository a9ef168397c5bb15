"""Breaking a wait-for cycle: abort the youngest wait, which a detector that checks on insert lists first."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from swarmlog.coordinator.commands import Rejected
from swarmlog.coordinator.draft import Draft


def on_detected(draft: Draft, data: Mapping[str, Any]) -> Rejected | None:
    """DeadlockBroken and an error PeerAnswered to the waiter of wait_ids[0], when that waiter is this region's."""
    cycle, wait_ids = list(data["cycle"]), list(data["wait_ids"])
    if not cycle or len(wait_ids) != len(cycle):
        return Rejected(f"DeadlockDetected needs one wait id per agent of its cycle; got {cycle} and {wait_ids}")
    if draft.state.broken_waits.intersection(wait_ids):
        return None
    waiter, waited_for, wait_id = cycle[0], cycle[1 % len(cycle)], wait_ids[0]
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
