"""A mission's timeline: its events across topics, causes before effects, then by time, with phase and costs."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from swarmlog.replay.components import JOURNAL
from swarmlog.replay.fold import Problem, Record, Repairs, decoded
from swarmlog.schemas.events import Event

PHASE_OF = {
    "MissionAccepted": "ACCEPTED",
    "MissionCompleted": "COMPLETED",
    "MissionFailed": "FAILED",
    "MissionRejected": "REJECTED",
}


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


def belongs(event: Event, mission_id: str) -> bool:
    """Whether an event is about the mission (its correlation id, or its mission_id field)."""
    return mission_id in (event.data.get("correlation_id"), event.data.get("mission_id"))


def of_mission(records: Iterable[Record], mission_id: str) -> tuple[list[Record], list[Problem]]:
    """The records a mission's replay needs: its events and the journal's agent facts; and what did not decode."""
    kept, problems, repairs = [], [], Repairs()
    for record, event in decoded(records):
        if isinstance(event, Problem):
            problems.append(event)
            continue
        repairs.note(record, event)
        if belongs(event, mission_id) or (record.topic == JOURNAL and "mission_id" not in event.data):
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
    found.sort(key=lambda pair: (pair[1].occurred_at_ms, pair[0].timestamp, pair[0].topic, pair[0].offset))
    return _steps(_causal(found)), list(repairs.resolve(problems))


def _causal(found: list[tuple[Record, Event]]) -> list[tuple[Record, Event]]:
    """`found` reordered so that every event whose cause is present comes after it (stable otherwise)."""
    by_id = {event.event_id: (record, event) for record, event in found}
    done: set[str] = set()
    result = []

    def emit(record: Record, event: Event) -> None:
        if event.event_id in done:
            return
        done.add(event.event_id)
        cause = by_id.get(event.data.get("causation_id") or "")
        if cause is not None:
            emit(*cause)
        result.append((record, event))

    for record, event in found:
        emit(record, event)
    return result


def _steps(found: list[tuple[Record, Event]]) -> list[Step]:
    """Timeline rows, each with the mission's phase as of that event."""
    phase, steps = "SUBMITTED", []
    for record, event in found:
        data = event.data
        phase = data["phase"] if event.name == "PhaseStarted" else PHASE_OF.get(event.name, phase)
        tokens = data.get("tokens", data.get("tokens_used"))
        if "prompt_tokens" in data:
            tokens = data["prompt_tokens"] + data["completion_tokens"]
        steps.append(
            Step(
                event.occurred_at_ms,
                record.topic,
                record.partition,
                record.offset,
                event.name,
                event.event_id,
                data.get("causation_id"),
                phase,
                data.get("agent_id", data.get("voter_agent_id")),
                data.get("task_id"),
                data.get("attempt"),
                data.get("latency_ms"),
                tokens,
            )
        )
    return steps
