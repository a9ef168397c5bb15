"""Rules a schema-valid record must also keep (positive counts, an acyclic task graph, ...); pure functions."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import TaskSpec

Check = Callable[[Any], None]
"""A rule over one event (an instance of a generated class); InvariantViolation when it is broken."""


class InvariantViolation(ValueError):
    """A record matches its schema but breaks a rule of the domain; `reason` says which."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _non_empty(field: str) -> Check:
    def check(record: Any) -> None:
        if not getattr(record, field):
            raise InvariantViolation(f"{field} must not be empty")

    return check


def _at_least(field: str, low: int) -> Check:
    def check(record: Any) -> None:
        value = getattr(record, field)
        if value is not None and value < low:  # a null optional field (TaskCrossChecked.replica) has no bound
            raise InvariantViolation(f"{field} must be at least {low}, got {value}")

    return check


def _unit_interval(field: str) -> Check:
    def check(record: Any) -> None:
        value = getattr(record, field)
        if not 0.0 <= value <= 1.0:
            raise InvariantViolation(f"{field} must be in [0, 1], got {value}")

    return check


# Rules keyed by field name: they apply to every record that has the field.
FIELD_RULES: Mapping[str, Check] = {
    "event_id": _non_empty("event_id"),
    "producer": _non_empty("producer"),
    "attempt": _at_least("attempt", 1),
    "replica": _at_least("replica", 0),
    "slot": _at_least("slot", 0),
    "reply_slot": _at_least("reply_slot", 0),
    "max_steps": _at_least("max_steps", 1),
    "prompt_tokens": _at_least("prompt_tokens", 0),
    "completion_tokens": _at_least("completion_tokens", 0),
    "tokens": _at_least("tokens", 0),
    "tokens_used": _at_least("tokens_used", 0),
    "used": _at_least("used", 0),
    "confidence": _unit_interval("confidence"),
    "window_ms": _at_least("window_ms", 1),
}


def _task_graph(tasks: Sequence[TaskSpec]) -> None:
    """Unique task ids, dependencies only on tasks of the mission, no cycle, runnable replicas and steps."""
    ids = [task.task_id for task in tasks]
    known = set(ids)
    if len(known) != len(ids):
        duplicates = sorted({task_id for task_id in ids if ids.count(task_id) > 1})
        raise InvariantViolation(f"task ids must be unique, repeated: {duplicates}")
    for task in tasks:
        unknown = sorted(set(task.depends_on) - known)
        if unknown:
            raise InvariantViolation(f"task {task.task_id!r} depends on unknown tasks {unknown}")
        if task.replicas < 1:
            raise InvariantViolation(f"task {task.task_id!r} must have at least 1 replica")
        if task.max_steps < 1:
            raise InvariantViolation(f"task {task.task_id!r} must allow at least 1 step")
    cycle = _find_cycle({task.task_id: task.depends_on for task in tasks})
    if cycle:
        raise InvariantViolation(f"task dependencies form a cycle: {' -> '.join(cycle)}")


def _find_cycle(edges: Mapping[str, Collection[str]]) -> list[str]:
    """A cycle of the directed graph as a closed path of nodes, or [] when it is acyclic."""
    done: set[str] = set()
    for start in edges:
        if start in done:
            continue
        path = [start]
        stack = [iter(edges[start])]
        while stack:
            successor = next(stack[-1], None)
            if successor is None:
                done.add(path.pop())
                stack.pop()
            elif successor in path:
                return [*path[path.index(successor) :], successor]
            elif successor not in done:
                path.append(successor)
                stack.append(iter(edges[successor]))
    return []


def _mission(record: Any) -> None:
    """A mission's task graph, consensus spec and limits (MissionSubmitted or MissionAccepted)."""
    _task_graph(record.tasks)
    if not record.tasks and record.planning is None:
        raise InvariantViolation("a mission needs at least one task or a planning spec")
    consensus = record.consensus
    if consensus.window_ms <= 0:
        raise InvariantViolation(f"consensus.window_ms must be positive, got {consensus.window_ms}")
    if not 0.0 < consensus.quorum <= 1.0:
        raise InvariantViolation(f"consensus.quorum must be in (0, 1], got {consensus.quorum}")
    for field in ("deadline_ms", "token_budget"):
        value = getattr(record, field, None)
        if value is not None and value <= 0:
            raise InvariantViolation(f"{field} must be positive when set, got {value}")


def _experience(record: Any) -> None:
    """An experience can be recalled (it has an embedding) and expires (positive ttl)."""
    if not record.embedding:
        raise InvariantViolation("embedding must not be empty")
    if record.ttl_s <= 0:
        raise InvariantViolation(f"ttl_s must be positive, got {record.ttl_s}")


def _deadlock(record: Any) -> None:
    """A detected deadlock names a cycle, and one wait (id and start time) per edge of it."""
    if not record.cycle:
        raise InvariantViolation("cycle must not be empty")
    for field in ("wait_ids", "waits_started_at"):
        entries = len(getattr(record, field))
        if entries != len(record.cycle):
            raise InvariantViolation(
                f"{field} must have one entry per edge of the cycle: {entries} for {len(record.cycle)}"
            )


def _budget_window(record: Any) -> None:
    """A budget window ends after it starts."""
    if record.window_end <= record.window_start:
        raise InvariantViolation(f"window_end {record.window_end} must be after window_start {record.window_start}")


def _slot_allocation(record: Any) -> None:
    """An allocated slot is one of the inbox partitions it was allocated from."""
    if record.slot >= record.partitions:
        raise InvariantViolation(f"slot {record.slot} is not one of the {record.partitions} inbox partitions")


# Rules keyed by record name, for the structure of one kind of event.
RECORD_RULES: Mapping[str, Check] = {
    "MissionSubmitted": _mission,
    "MissionAccepted": _mission,
    "ExperienceRecorded": _experience,
    "DeadlockDetected": _deadlock,
    "BudgetExceeded": _budget_window,
    "SlotAllocated": _slot_allocation,
}


def checks_for(name: str, fields: Collection[str]) -> tuple[Check, ...]:
    """Every check that applies to a record `name` with these fields (precompute it once per schema)."""
    checks = [FIELD_RULES[field] for field in fields if field in FIELD_RULES]
    if name in RECORD_RULES:
        checks.append(RECORD_RULES[name])
    return tuple(checks)


def check(event: Event) -> None:
    """Raise InvariantViolation unless the event keeps every rule of its record."""
    for rule in checks_for(event.name, event.__struct_fields__):
        rule(event)
