"""A mission's timeline: its events across topics, causes before effects, then by time, with phase and costs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TypeVar

from swarmlog.coordinator.progress import PROGRESS, cross_check
from swarmlog.replay.fold import Problem, Record, Repairs, decoded
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    MissionCompleted,
    MissionFailed,
    TaskCompleted,
    TaskCrossChecked,
    TaskFailed,
    TaskResultRecorded,
    TaskStepTaken,
    TokensUsed,
    VoteCast,
    VoteRecorded,
    VoteRequested,
)
from swarmlog.topics import JOURNAL

T = TypeVar("T")


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One event of a mission's timeline."""

    at_ms: int
    topic: str
    partition: int
    offset: int
    name: str
    event_id: str
    causation_id: str | None
    phase: str
    agent: str | None
    task: str | None
    attempt: int | None
    latency_ms: int | None
    tokens: int | None
    note: str | None
    """What a decision decided, in a few words (a task's cross-check), or how an answer was sampled."""


def belongs(event: Event, mission_id: str) -> bool:
    """Whether an event is about the mission (its correlation id, or its mission_id field)."""
    return mission_id in (event.correlation_id, event.mission_id)


def of_mission(records: Iterable[Record], mission_id: str) -> tuple[list[Record], list[Problem]]:
    """The records a mission's replay needs: its events and the journal's agent facts; and what did not decode."""
    kept, problems, repairs = [], [], Repairs()
    for record, event in decoded(records):
        if isinstance(event, Problem):
            problems.append(event)
            continue
        repairs.note(record, event)
        if belongs(event, mission_id) or (record.topic == JOURNAL and "mission_id" not in event.__struct_fields__):
            kept.append(record)
    return kept, list(repairs.resolve(problems))


def timeline(records: Iterable[Record], mission_id: str) -> tuple[list[Step], list[Problem]]:
    """The mission's events in causal order (a cause before its effects, otherwise by occurred_at), and problems."""
    found: list[tuple[Record, Event]] = []
    problems, repairs = [], Repairs()
    for record, event in decoded(records):
        if isinstance(event, Problem):
            problems.append(event)
            continue
        repairs.note(record, event)
        if belongs(event, mission_id):
            found.append((record, event))
    found.sort(key=lambda pair: (pair[1].occurred_at, pair[0].timestamp, pair[0].topic, pair[0].offset))
    return _steps(_causal(found), mission_id), list(repairs.resolve(problems))


def _causal(found: list[tuple[Record, Event]]) -> list[tuple[Record, Event]]:
    """`found` reordered so that every event whose cause is present comes after it (stable otherwise)."""
    by_id = {event.event_id: (record, event) for record, event in found}
    done: set[str] = set()
    result = []

    def emit(record: Record, event: Event) -> None:
        if event.event_id in done:
            return
        done.add(event.event_id)
        cause = by_id.get(event.causation_id or "")
        if cause is not None:
            emit(*cause)
        result.append((record, event))

    for record, event in found:
        emit(record, event)
    return result


def _steps(found: list[tuple[Record, Event]], mission_id: str) -> list[Step]:
    """Timeline rows, each with the mission's phase as of that event (its progress, folded from its journal events)."""
    progress, steps = PROGRESS.initial(mission_id), []
    for record, event in found:
        if record.topic in PROGRESS.topics:
            progress = PROGRESS.evolve(progress, event)
        steps.append(
            Step(
                event.occurred_at,
                record.topic,
                record.partition,
                record.offset,
                event.name,
                event.event_id,
                event.causation_id,
                progress.phase,
                _agent(event),
                event.task_id,
                event.attempt,
                _latency(event),
                _tokens(event),
                _note(event),
            )
        )
    return steps


def _agent(event: Event) -> str | None:
    """The agent an event is about: its agent_id, or the voter of a vote."""
    if isinstance(event, VoteRequested | VoteCast | VoteRecorded):
        return event.voter_agent_id
    return event.agent_id


def _tokens(event: Event) -> int | None:
    """The tokens an event accounts for, where it accounts for any."""
    match event:
        case TaskResultRecorded():
            return event.tokens
        case MissionCompleted() | MissionFailed():
            return event.tokens_used
        case TaskCompleted() | TaskFailed() | TaskStepTaken() | TokensUsed():
            return event.prompt_tokens + event.completion_tokens
    return None


def _note(event: Event) -> str | None:
    """A decision's few words (a task's cross-check), or how an answer was sampled (from TaskCompleted v2)."""
    match event:
        case TaskCrossChecked():
            return cross_check(event)
        case TaskCompleted(temperature=float() as temperature, seed=int() as seed):
            return f"sampled at temperature {temperature:g}, seed {seed}"
    return None


def _latency(event: Event) -> int | None:
    """How long the work an event ends took, where it ends any."""
    match event:
        case TaskCompleted() | TaskFailed() | TaskResultRecorded() | MissionCompleted() | MissionFailed():
            return event.latency_ms
    return None
