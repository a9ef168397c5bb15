"""A mission's task DAG: specs from Avro records or a planner's JSON answer, validated."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from swarmlog.coordinator.state import DECISION_MAKING, EQUAL, FINAL_TASK, JUDGE, PLAN_TASK, VOTE, TaskSpec
from swarmlog.schemas import records

RESERVED_PREFIX = "@"
MAX_STEPS = 4
MIN_TASK_TOKENS = 129
"""The fewest tokens a task may give its generations: one more than an action's overhead
(swarmlog.actors.actions.ACTION_OVERHEAD_TOKENS, which a core cannot import; a test ties the two), so that some
content fits."""
RULES = (EQUAL, VOTE, JUDGE)
"""The cross-check rules a task may name (TaskSpec.check)."""
MAX_TASK_TOKENS = 1 << 20
"""The most tokens a task may give its generations (1,048,576): beyond any model's context today, so a larger value
is a typo; an output larger than an event travels as an artifact."""


def from_record(record: records.TaskSpec) -> TaskSpec:
    """A WORK spec from an Avro TaskSpec record."""
    return TaskSpec(
        task_id=record.task_id,
        prompt=record.prompt,
        required_capabilities=frozenset(record.required_capabilities),
        depends_on=tuple(record.depends_on),
        replicas=record.replicas,
        max_steps=record.max_steps,
        max_tokens=record.max_tokens,
        check=record.check,
        judge=record.judge,
    )


def to_record(spec: TaskSpec) -> records.TaskSpec:
    """The Avro TaskSpec record of a WORK spec."""
    return records.TaskSpec(
        task_id=spec.task_id,
        prompt=spec.prompt,
        required_capabilities=sorted(spec.required_capabilities),
        depends_on=list(spec.depends_on),
        replicas=spec.replicas,
        max_steps=spec.max_steps,
        max_tokens=spec.max_tokens,
        check=spec.check,  # type: ignore[arg-type]  # a rule problem() accepted is one of the enum's symbols
        judge=spec.judge,
    )


def mission_tasks(accepted: records.MissionAccepted) -> dict[str, TaskSpec]:
    """Every spec of an accepted mission: its planning step, explicit tasks and final step."""
    specs: dict[str, TaskSpec] = {}
    if accepted.planning is not None:
        planning = accepted.planning
        specs[PLAN_TASK] = TaskSpec(PLAN_TASK, planning.prompt, frozenset(planning.required_capabilities), kind="PLAN")
    specs.update((record.task_id, from_record(record)) for record in accepted.tasks)
    if accepted.final_action is not None:
        final = accepted.final_action
        required = frozenset(final.required_capabilities) | {DECISION_MAKING}
        specs[FINAL_TASK] = TaskSpec(FINAL_TASK, final.prompt, required, kind="FINAL")
    return specs


def problem(specs: Sequence[TaskSpec]) -> str | None:
    """Why these WORK specs are not a runnable DAG, or None when they are."""
    if not specs:
        return "no tasks"
    ids = [spec.task_id for spec in specs]
    known = set(ids)
    if len(known) != len(ids):
        return f"duplicate task ids in {ids}"
    for spec in specs:
        if not spec.task_id or spec.task_id.startswith(RESERVED_PREFIX):
            return f"task id {spec.task_id!r} is empty or starts with the reserved {RESERVED_PREFIX!r}"
        if spec.replicas < 1 or spec.max_steps < 1:
            return f"task {spec.task_id!r} needs replicas >= 1 and max_steps >= 1"
        if spec.max_tokens is not None and not MIN_TASK_TOKENS <= spec.max_tokens <= MAX_TASK_TOKENS:
            return (
                f"task {spec.task_id!r} has max_tokens {spec.max_tokens}; give {MIN_TASK_TOKENS} to {MAX_TASK_TOKENS}, "
                "or leave it out for the agent's own"
            )
        rule = _rule_problem(spec)
        if rule:
            return rule
        unknown = set(spec.depends_on) - known
        if unknown:
            return f"task {spec.task_id!r} depends on unknown tasks {sorted(unknown)}"
    return _cycle(specs)


def _rule_problem(spec: TaskSpec) -> str | None:
    """Why the task's cross-check rule cannot run, or None."""
    if spec.check not in RULES:
        return f"task {spec.task_id!r} has check {spec.check!r}; give one of {list(RULES)}"
    if (spec.check == JUDGE) != bool(spec.judge):
        return f"task {spec.task_id!r}: check JUDGE needs judge (the capability its judge agent has), and only it does"
    return None


def _cycle(specs: Sequence[TaskSpec]) -> str | None:
    """A message naming the tasks on a dependency cycle or behind one, or None (Kahn's algorithm: O(tasks + edges))."""
    missing = {spec.task_id: len(set(spec.depends_on)) for spec in specs}  # dependencies not yet ordered
    dependents: dict[str, list[str]] = {}
    for spec in specs:
        for dependency in set(spec.depends_on):
            dependents.setdefault(dependency, []).append(spec.task_id)
    ready = [task for task, count in missing.items() if not count]
    while ready:
        for dependent in dependents.get(ready.pop(), ()):
            missing[dependent] -= 1
            if not missing[dependent]:
                ready.append(dependent)
    waiting = [task for task, count in missing.items() if count]
    return f"dependency cycle among {sorted(waiting)}" if waiting else None


def parse(answer: str) -> tuple[TaskSpec, ...] | str:
    """The WORK specs of a planner's answer (a JSON list of task objects), or why it is invalid."""
    try:
        items = json.loads(answer)
    except ValueError as error:
        return f"the plan is not JSON: {error}"
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        return "the plan must be a JSON list of task objects"
    try:
        specs = tuple(_spec(item) for item in items)
    except (KeyError, TypeError) as error:
        return f"a planned task is malformed: {error}"
    return problem(specs) or specs


def _spec(item: Mapping[str, Any]) -> TaskSpec:
    """One planned task, checking the type of every field it reads."""
    for field in ("required_capabilities", "depends_on"):
        if not isinstance(item.get(field, []), list):
            raise TypeError(f"{field} must be a list in {item}")
    spec = TaskSpec(
        task_id=item["task_id"],
        prompt=item["prompt"],
        required_capabilities=frozenset(item.get("required_capabilities", ())),
        depends_on=tuple(item.get("depends_on", ())),
        replicas=item.get("replicas", 1),
        max_steps=item.get("max_steps", MAX_STEPS),
        max_tokens=item.get("max_tokens"),
        check=item.get("check", EQUAL),
        judge=item.get("judge"),
    )
    strings = [spec.task_id, spec.prompt, spec.check, *spec.required_capabilities, *spec.depends_on]
    strings += [] if spec.judge is None else [spec.judge]
    if not all(isinstance(value, str) for value in strings):
        raise TypeError(
            f"task_id, prompt, check, judge, required_capabilities and depends_on must be strings in {item}"
        )
    integers = (spec.replicas, spec.max_steps, *(() if spec.max_tokens is None else (spec.max_tokens,)))
    if not all(isinstance(value, int) and not isinstance(value, bool) for value in integers):
        raise TypeError(f"replicas, max_steps and max_tokens must be integers in {item}")
    return spec
