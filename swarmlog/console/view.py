"""The console's view of the swarm: a pure fold of located events, and the JSON-ready sections its pages show.

No I/O and no clock: the feed (`feed.py`) reads and decodes the log and folds each event here, and the time a section
is shown at comes in as an argument. The agents are the registry's own projection (`streams.registry`), a mission's
phase is the coordinator's own progress fold (`coordinator.progress`); what this module adds is the tasks' states, the
timelines and the dead letters, each bounded (`KEPT_*`) so a long-lived console holds a bounded view.
"""

from __future__ import annotations

import bisect
import collections
import dataclasses
from collections.abc import Iterable
from typing import Any

import msgspec

from swarmlog.coordinator.progress import PROGRESS, MissionProgress
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    BudgetWindowSet,
    ConsensusReached,
    DeadLetterRecorded,
    DeadlockBroken,
    DeadlockDetected,
    MissionAccepted,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    MissionSubmitted,
    TaskAssigned,
    TaskQueued,
    TaskReassigned,
    TaskResultRecorded,
    TaskStartRecorded,
    VoteCast,
    VoteRecorded,
    VoteRequested,
    WaitEnded,
    WaitStarted,
)
from swarmlog.streams import budgets, registry, waitgraph
from swarmlog.streams.persistent import PMap, PSet
from swarmlog.topics import ALERTS, CONTROL, DEAD_LETTERS, HEARTBEATS, JOURNAL, REGISTRY, USAGE, WAITS

KEPT_ENDED = 200
"""Ended missions kept (with their timelines); the oldest ended one goes when one more ends."""
KEPT_STEPS = 5000
"""Timeline events kept per mission (the latest)."""
KEPT_DEAD_LETTERS = 500
"""Dead letters kept (the latest)."""
KEPT_DEADLOCKS = 100
"""Deadlocks detected and broken kept (the latest)."""

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


@dataclasses.dataclass(frozen=True, slots=True)
class Located:
    """One decoded event and where it sits in the log."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    event: Event


@dataclasses.dataclass(frozen=True, slots=True)
class TaskRow:
    """One replica of one task: its state (PLANNED, QUEUED, ASSIGNED, RUNNING, REASSIGNED, DONE, FAILED)."""

    state: str
    attempt: int = 0
    agent: str | None = None
    output: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class MissionRow:
    """One mission as the console holds it: its progress, region, tasks by (task, replica), timeline, the votes
    recorded per ballot (the candidate of each) and the candidate each decided ballot chose, and the ids of the events
    folded (a duplicate is folded once)."""

    progress: MissionProgress
    region: str | None = None
    submitted_at: int | None = None
    tasks: PMap[tuple[str, int], TaskRow] = dataclasses.field(default_factory=PMap)
    steps: tuple[Located, ...] = ()
    seen: PSet[str] = dataclasses.field(default_factory=PSet)
    votes: PMap[str, tuple[str, ...]] = dataclasses.field(default_factory=PMap)
    chosen: PMap[str, str] = dataclasses.field(default_factory=PMap)

    @property
    def known(self) -> bool:
        """Whether the mission's submission or acceptance has been read."""
        return self.submitted_at is not None

    @property
    def ended(self) -> bool:
        """Whether the mission completed, failed or was rejected."""
        return self.progress.result is not None


@dataclasses.dataclass(frozen=True, slots=True)
class ConsoleView:
    """Everything the console shows: the registry, the token budgets (the worker's own fold, with the budget of the
    last BudgetWindowSet), the wait-for graph (the streams worker's own fold) and the latest
    deadlocks detected and broken, the missions (the running ones and the last KEPT_ENDED ended ones,
    in the order they ended; the ids of those dropped, whose late events are passed over), the latest dead letters, and
    how many events were folded.

    A mission's row begins with whichever of its events is read first (topics are read side by side: an agent's
    TaskStarted may come before the journal's MissionAccepted); it is listed once its submission or acceptance is
    read."""

    registry: registry.Registry = registry.INITIAL
    budgets: budgets.Budgets = budgets.INITIAL
    budget_tokens: int | None = None
    waits: waitgraph.WaitGraph = waitgraph.INITIAL
    deadlocks: tuple[Located, ...] = ()
    missions: PMap[str, MissionRow] = dataclasses.field(default_factory=PMap)
    ended: tuple[str, ...] = ()
    dropped: PSet[str] = dataclasses.field(default_factory=PSet)
    dead_letters: tuple[Located, ...] = ()
    events: int = 0


INITIAL = ConsoleView()


def evolve(view: ConsoleView, item: Located) -> ConsoleView:
    """The view after one located event; an event of no kind the console shows changes only the count."""
    view = dataclasses.replace(view, events=view.events + 1)
    event = item.event
    if item.topic in (REGISTRY, HEARTBEATS):
        return dataclasses.replace(view, registry=registry.evolve(view.registry, event))
    if item.topic in budgets.PROJECTION.topics:
        return _budgets(view, [event], budgets.evolve(view.budgets, event))
    if item.topic == DEAD_LETTERS:
        if not isinstance(event, DeadLetterRecorded):
            return view
        return dataclasses.replace(view, dead_letters=(*view.dead_letters, item)[-KEPT_DEAD_LETTERS:])
    if item.topic in waitgraph.PROJECTION.topics:
        view = dataclasses.replace(view, waits=waitgraph.evolve(view.waits, event))
    if isinstance(event, DeadlockDetected) or (item.topic == JOURNAL and isinstance(event, DeadlockBroken)):
        view = dataclasses.replace(view, deadlocks=(*view.deadlocks, item)[-KEPT_DEADLOCKS:])
    mission_id = event.mission_id or event.correlation_id
    if mission_id is None or mission_id in view.dropped:
        return view
    row = view.missions.get(mission_id) or MissionRow(MissionProgress(mission_id))
    if event.event_id in row.seen:
        return view
    was_ended, row = row.ended, _mission(row, item)
    missions, ended, dropped = view.missions.set(mission_id, row), view.ended, view.dropped
    if row.ended and not was_ended:
        ended = (*ended, mission_id)
        for gone in ended[:-KEPT_ENDED]:
            missions, dropped = missions.delete(gone), dropped.add(gone)
        ended = ended[-KEPT_ENDED:]
    return dataclasses.replace(view, missions=missions, ended=ended, dropped=dropped)


def fold(view: ConsoleView, items: Iterable[Located]) -> ConsoleView:
    """`evolve` over `items` in order; the registry's events go through its batch fold (`registry.evolve_all`, which
    its one-event fold equals, without a scan of every agent per event), as nothing else depends on them."""
    agents: list[Event] = []
    usage: list[Event] = []
    for item in items:
        if item.topic in (REGISTRY, HEARTBEATS):
            agents.append(item.event)
        elif item.topic in budgets.PROJECTION.topics:
            usage.append(item.event)
        else:
            view = evolve(view, item)
    if usage:
        view = _budgets(view, usage, budgets.evolve_all(view.budgets, usage))
        view = dataclasses.replace(view, events=view.events + len(usage))
    if not agents:
        return view
    return dataclasses.replace(
        view, registry=registry.evolve_all(view.registry, agents), events=view.events + len(agents)
    )


def _budgets(view: ConsoleView, events: list[Event], folded: budgets.Budgets) -> ConsoleView:
    """The view with the budgets folded from `events`, and the budget of their last BudgetWindowSet."""
    tokens = view.budget_tokens
    for event in events:
        if isinstance(event, BudgetWindowSet) and event.window_ms >= 1:
            tokens = event.tokens
    return dataclasses.replace(view, budgets=folded, budget_tokens=tokens)


def sections(item: Located) -> frozenset[str]:
    """The sections of the page an event may change: `swarm`, `missions`, `mission:<id>`, `deadletters`."""
    if item.topic in (REGISTRY, HEARTBEATS, USAGE, CONTROL):
        return frozenset({"swarm"})
    if item.topic == DEAD_LETTERS:
        return frozenset({"deadletters"})
    event = item.event
    waits = item.topic in (WAITS, ALERTS) or isinstance(event, DeadlockBroken)
    mission_id = event.mission_id or event.correlation_id
    touched = {"swarm", "missions", f"mission:{mission_id}"} if mission_id else set()
    return frozenset(touched | ({"waits"} if waits else set()))


def _mission(row: MissionRow, item: Located) -> MissionRow:
    """One mission's row after one of its events."""
    event = item.event
    progress = PROGRESS.evolve(row.progress, event) if item.topic in PROGRESS.topics else row.progress
    region, submitted_at, tasks = row.region, row.submitted_at, row.tasks
    match event:
        case MissionSubmitted():
            progress = progress if progress.title else dataclasses.replace(progress, title=event.title)
            region, submitted_at = region or event.region, submitted_at or event.occurred_at
        case MissionAccepted():
            region, submitted_at = event.region, event.submitted_at
            for spec in event.tasks:
                for replica in range(spec.replicas):
                    tasks = tasks if (spec.task_id, replica) in tasks else tasks.set((spec.task_id, replica), _PLANNED)
    votes, chosen = row.votes, row.chosen
    if item.topic == JOURNAL:
        tasks = _tasks(tasks, event)
        if isinstance(event, VoteRecorded):
            votes = votes.set(event.ballot_id, (*votes.get(event.ballot_id, ()), event.candidate_id))
        elif isinstance(event, ConsensusReached):
            chosen = chosen.set(event.ballot_id, event.candidate_id)
    steps = list(row.steps)
    bisect.insort(steps, item, key=_step_order)
    seen = row.seen.add(event.event_id)
    return MissionRow(progress, region, submitted_at, tasks, tuple(steps[-KEPT_STEPS:]), seen, votes, chosen)


_PLANNED = TaskRow("PLANNED")


def _step_order(item: Located) -> tuple[int, int, str, int, int]:
    """Timeline order: by the producer's time, then the broker's, then the place in the log."""
    return (item.event.occurred_at, item.timestamp, item.topic, item.partition, item.offset)


def _tasks(tasks: PMap[tuple[str, int], TaskRow], event: Event) -> PMap[tuple[str, int], TaskRow]:
    """The tasks after one journal event; an event about an attempt older than the task's current one changes
    nothing."""
    match event:
        case TaskQueued() | TaskAssigned() | TaskStartRecorded() | TaskReassigned() | TaskResultRecorded():
            key = (event.task_id, event.replica)
        case _:
            return tasks
    current = tasks.get(key)
    if current is not None and event.attempt < current.attempt:
        return tasks
    match event:
        case TaskQueued():
            return tasks.set(key, TaskRow("QUEUED", event.attempt))
        case TaskAssigned():
            return tasks.set(key, TaskRow("ASSIGNED", event.attempt, event.agent_id))
        case TaskStartRecorded():
            return tasks.set(key, TaskRow("RUNNING", event.attempt, event.agent_id))
        case TaskReassigned():
            return tasks.set(key, TaskRow("REASSIGNED", event.attempt, None))
        case TaskResultRecorded(stale=False):
            state = "DONE" if event.succeeded else "FAILED"
            return tasks.set(key, TaskRow(state, event.attempt, event.agent_id, event.output))
    return tasks


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
        "agreement": agreement(row.tasks),
        "ballots": ballots,
        "steps": steps,
    }


def agreement(tasks: PMap[tuple[str, int], TaskRow]) -> dict[str, str]:
    """Whether the replicas of each replicated task agree: `agree` (every replica done, one output), `differ` (done
    replicas with different outputs), else `pending`."""
    replicas: dict[str, list[TaskRow]] = {}
    for (task_id, _), task in sorted(tasks.items()):
        replicas.setdefault(task_id, []).append(task)
    verdicts = {}
    for task_id, rows in replicas.items():
        if len(rows) < 2:
            continue
        outputs = {row.output for row in rows if row.state == "DONE"}
        done = all(row.state == "DONE" for row in rows)
        verdicts[task_id] = "differ" if len(outputs) > 1 else "agree" if done else "pending"
    return verdicts


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
