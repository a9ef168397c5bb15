"""The console's view of the swarm: a pure fold of located events (`pages.py` shows it).

No I/O and no clock: the feed (`feed.py`) reads and decodes the log and folds each batch here. The agents are the
registry's own projection (`streams.registry`), their token use the budgets' (`streams.budgets`), the waits the
wait-for graph's (`streams.waitgraph`), a mission's phase the coordinator's own progress fold
(`coordinator.progress`); what this module adds is the tasks' states, the ballots, the timelines and the dead letters,
each bounded (`KEPT_*`) so a long-lived console holds a bounded view.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable

from swarmlog.coordinator.progress import PROGRESS, MissionProgress
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    BudgetWindowSet,
    ConsensusReached,
    DeadLetterRecorded,
    DeadlockBroken,
    DeadlockDetected,
    MissionAccepted,
    MissionSubmitted,
    TaskAssigned,
    TaskQueued,
    TaskReassigned,
    TaskResultRecorded,
    TaskStartRecorded,
    VoteRecorded,
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
