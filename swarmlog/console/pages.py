"""The console's pages as JSON-ready data, from its view (`view.py`): Swarm, Missions, one mission, Waits, Dead letters.

Pure like the view: the time a page is shown at comes in as an argument. Everything here is untrusted log data on its
way to the page, which writes it as text only.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

import msgspec

from swarmlog.console.view import ConsoleView, Located, MissionRow
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    DeadLetterRecorded,
    DeadlockBroken,
    DeadlockDetected,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    TaskReassigned,
    VoteCast,
    VoteRecorded,
    VoteRequested,
    WaitEnded,
    WaitStarted,
)
from swarmlog.streams import budgets, registry, waitgraph

MAX_ENTRIES = 1000
"""Entries of a replayed state sent to the page at most (the differing first)."""

MARKS = {
    TaskReassigned.name: "reassigned",
    DeadlockBroken.name: "deadlock",
    WaitStarted.name: "wait",
    WaitEnded.name: "wait",
    MissionCompleted.name: "end",
    MissionFailed.name: "failed",
    MissionRejected.name: "failed",
}
"""The timeline events drawn apart from the others, by the kind of mark."""


def status_of(agent: registry.AgentView, now_ms: int, timeout_ms: int = registry.DEFAULT_TIMEOUT_MS) -> str:
    """DEAD or DEREGISTERED from the registry, SILENT by the registry's liveness rule, else the agent's own status
    (the rule `swarmlog status` shows)."""
    if not agent.alive:
        return agent.liveness.upper()
    return "SILENT" if registry.silent(agent, now_ms, timeout_ms) else agent.status


def swarm(view: ConsoleView, regions: Iterable[str], now_ms: int) -> dict[str, Any]:
    """The Swarm page: each region's agents by status, running missions and queued tasks; every agent."""
    agents = sorted(view.registry.agents.values(), key=lambda agent: (agent.region, agent.agent_id))
    rows: list[dict[str, Any]] = [
        {
            "agent_id": agent.agent_id,
            "region": agent.region,
            "slot": agent.slot,
            "status": status_of(agent, now_ms),
            "capabilities": sorted(agent.capabilities),
            "model": agent.model,
            "brain": agent.brain,
            "gpu": agent.gpu,
            "node": agent.node,
            "heartbeat_age_s": round(max(0, now_ms - agent.last_heartbeat_ms) / 1000, 1),
            "task": agent.in_flight_task,
            **_usage(view, agent.agent_id, now_ms),
        }
        for agent in agents
    ]
    by_region: dict[str, dict[str, Any]] = {
        region: {"region": region, "agents": {}, "running_missions": 0, "queued_tasks": 0} for region in regions
    }
    for row in rows:
        counts = _region(by_region, row["region"])["agents"]
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    for mission in view.missions.values():
        if mission.known and mission.region is not None and not mission.ended:
            region = _region(by_region, mission.region)
            region["running_missions"] += 1
            region["queued_tasks"] += sum(1 for task in mission.tasks.values() if task.state == "QUEUED")
    return {"now_ms": now_ms, "regions": list(by_region.values()), "agents": rows}


def _usage(view: ConsoleView, agent_id: str, now_ms: int) -> dict[str, Any]:
    """An agent's tokens in the current budget window (0 when its last usage is of an earlier window), the budget per
    window (the streams worker's default; overrides are not in the log), and until when it is throttled."""
    usage = view.budgets.agents.get(agent_id)
    current = usage is not None and budgets.window_start(now_ms, view.budgets.window_ms) == usage.window_start
    throttled = usage.throttled_until if usage is not None else None
    return {
        "tokens": usage.used if usage is not None and current else 0,
        "budget": view.budget_tokens,
        "throttled_until": throttled if throttled is not None and throttled > now_ms else None,
    }


def _region(by_region: dict[str, dict[str, Any]], name: str) -> dict[str, Any]:
    """A region's entry, added when the log names a region the settings do not."""
    return by_region.setdefault(name, {"region": name, "agents": {}, "running_missions": 0, "queued_tasks": 0})


def missions(view: ConsoleView) -> list[dict[str, Any]]:
    """The Missions page: running missions (latest submitted first), then ended ones (latest ended first)."""
    running = sorted(
        (row for row in view.missions.values() if row.known and not row.ended),
        key=lambda row: (-(row.submitted_at or 0), row.progress.mission_id),
    )
    ended = [view.missions[mission_id] for mission_id in reversed(view.ended) if view.missions[mission_id].known]
    return [_summary(row) for row in (*running, *ended)]


def _summary(row: MissionRow) -> dict[str, Any]:
    """One mission's line: its progress, region, tasks by state and how it ended."""
    states = collections.Counter(task.state for task in row.tasks.values())
    result = row.progress.result
    return {
        **row.progress.summary(),
        "region": row.region,
        "submitted_at": row.submitted_at,
        "ended": row.ended,
        "succeeded": row.progress.succeeded,
        "tasks": dict(sorted(states.items())),
        "latency_ms": result.latency_ms if isinstance(result, MissionCompleted | MissionFailed) else None,
        "outputs": list(result.outputs) if isinstance(result, MissionCompleted | MissionFailed) else [],
        "events": len(row.steps),
    }


def mission(view: ConsoleView, mission_id: str) -> dict[str, Any] | None:
    """One mission's page: its summary, its tasks, and its timeline in lanes, each event with its payload and its
    place in the log; None for a mission the view does not hold."""
    row = view.missions.get(mission_id)
    if row is None or not row.known:
        return None
    steps = [_step(index, item) for index, item in enumerate(row.steps)]
    agents = list(dict.fromkeys(step["lane"] for step in steps if step["lane"] not in ("client", "coordinator")))
    lanes = [lane for lane in ("client", "coordinator") if any(step["lane"] == lane for step in steps)]
    tasks = [
        {
            "task_id": task_id,
            "replica": replica,
            "state": task.state,
            "attempt": task.attempt,
            "agent": task.agent,
            "output": task.output,
        }
        for (task_id, replica), task in sorted(row.tasks.items())
    ]
    ballots = [
        {
            "ballot_id": ballot,
            "votes": dict(collections.Counter(row.votes.get(ballot, ()))),
            "chosen": row.chosen.get(ballot),
        }
        for ballot in sorted({*row.votes, *row.chosen})
    ]
    return {
        "summary": _summary(row),
        "lanes": [*lanes, *agents],
        "tasks": tasks,
        "agreement": agreement(row),
        "ballots": ballots,
        "steps": steps,
    }


def agreement(row: MissionRow) -> dict[str, str]:
    """Each replicated task's cross-check as the journal tells it (TaskCrossChecked: agreed, tie-breaker, disputed),
    `pending` until it is compared."""
    replicated = {task_id for task_id, replica in row.tasks if replica > 0} | set(row.progress.checks)
    return {task_id: row.progress.checks.get(task_id, "pending") for task_id in sorted(replicated)}


def _step(index: int, item: Located) -> dict[str, Any]:
    """One timeline event: when, which lane, its mark, its full payload and its coordinates."""
    event = item.event
    return {
        "index": index,
        "at_ms": event.occurred_at,
        "lane": lane_of(event),
        "name": event.name,
        "mark": MARKS.get(event.name),
        "topic": item.topic,
        "partition": item.partition,
        "offset": item.offset,
        "event_id": event.event_id,
        "causation_id": event.causation_id,
        "task_id": event.task_id,
        "attempt": event.attempt,
        "payload": plain(event),
    }


def lane_of(event: Event) -> str:
    """The lane an event is drawn in: the agent it is about (the voter of a vote, the waiter of a wait), else the
    kind of its producer (`coordinator`, `client`, `streams`)."""
    match event:
        case VoteRequested() | VoteCast() | VoteRecorded():
            return event.voter_agent_id
        case WaitStarted() | WaitEnded() | DeadlockBroken():
            return event.waiter_agent_id
    if event.agent_id:
        return event.agent_id
    kind = event.producer.partition(":")[0]
    return kind if kind in ("coordinator", "streams", "agent") else "client"


def waits(view: ConsoleView, now_ms: int) -> dict[str, Any]:
    """The Waits page: the active waits (oldest first), the cycles they close now (by the worker's own cycle finder),
    and the latest deadlocks detected and broken (latest first)."""
    graph = view.waits
    active = sorted(graph.waits.values(), key=lambda wait: (wait.started_ms, wait.wait_id))
    cycles = {cycle for wait in active if (cycle := waitgraph.cycle_through(graph, wait.wait_id)) is not None}
    return {
        "now_ms": now_ms,
        "waits": [
            {
                "wait_id": wait.wait_id,
                "waiter": wait.waiter,
                "waits_for": wait.waits_for,
                "started_ms": wait.started_ms,
                "age_s": round(max(0, now_ms - wait.started_ms) / 1000, 1),
            }
            for wait in active
        ],
        "cycles": [
            {"agents": list(cycle.agents), "wait_ids": list(cycle.wait_ids)}
            for cycle in sorted(cycles, key=lambda cycle: cycle.wait_ids)
        ],
        "deadlocks": [_deadlock(item) for item in reversed(view.deadlocks)],
    }


def _deadlock(item: Located) -> dict[str, Any]:
    """One deadlock detected (its cycle) or broken (the wait aborted), with its place in the log."""
    event = item.event
    return {
        "at_ms": event.occurred_at,
        "name": event.name,
        "cycle": list(event.cycle) if isinstance(event, DeadlockDetected | DeadlockBroken) else [],
        "aborted": event.wait_id if isinstance(event, DeadlockBroken) else None,
        "mission_id": event.mission_id,
        "topic": item.topic,
        "partition": item.partition,
        "offset": item.offset,
    }


def dead_letters(view: ConsoleView) -> list[dict[str, Any]]:
    """The Dead letters page, latest first: reason, origin, raw key and payload as hex, and the payload's printable
    characters."""
    rows = []
    for item in reversed(view.dead_letters):
        letter = item.event
        assert isinstance(letter, DeadLetterRecorded)  # evolve keeps no other kind
        rows.append(
            {
                "at_ms": letter.occurred_at,
                "reason": letter.reason,
                "error_type": letter.error_type,
                "consumer": letter.consumer,
                "origin": {
                    "topic": letter.origin_topic,
                    "partition": letter.origin_partition,
                    "offset": letter.origin_offset,
                },
                "key_hex": None if letter.origin_key is None else letter.origin_key.hex(),
                "payload_hex": letter.payload.hex(),
                "payload_text": printable(letter.payload),
                "size": len(letter.payload),
                "topic": item.topic,
                "partition": item.partition,
                "offset": item.offset,
            }
        )
    return rows


def printable(raw: bytes) -> str:
    """The bytes as text, each byte outside printable ASCII shown as '.'."""
    return "".join(chr(byte) if 32 <= byte < 127 else "." for byte in raw)


def plain(value: Any) -> Any:
    """An event (or any of its values) as JSON-ready data: records as objects of their fields, bytes as hex."""
    if isinstance(value, msgspec.Struct):
        return {name: plain(getattr(value, name)) for name in value.__struct_fields__}
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list | tuple):
        return [plain(inner) for inner in value]
    if isinstance(value, dict):
        return {str(key): plain(inner) for key, inner in value.items()}
    return value


def compared(replayed: dict[str, Any], live: dict[str, Any] | None) -> dict[str, Any]:
    """A replayed state's entries next to the live ones (None: no live state to compare with): every entry of either,
    with its two values and whether they differ, the differing first; at most MAX_ENTRIES of them."""
    names = sorted(set(replayed) | set(live or {}))
    rows = [
        {
            "entry": name,
            "replayed": replayed.get(name),
            "live": None if live is None else live.get(name),
            "differs": live is not None and replayed.get(name) != live.get(name),
        }
        for name in names
    ]
    rows.sort(key=lambda row: not row["differs"])
    return {
        "compared": live is not None,
        "entries": len(rows),
        "differing": sum(1 for row in rows if row["differs"]),
        "rows": rows[:MAX_ENTRIES],
    }
