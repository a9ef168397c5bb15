"""Hypothesis strategies for values of an Avro schema (JSON form), and for events that keep the invariants."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from hypothesis import strategies as st

from swarmlog.coordinator.plan import MAX_TASK_TOKENS, MIN_TASK_TOKENS
from swarmlog.schemas import invariants, records
from swarmlog.schemas.catalog import SchemaVersion
from swarmlog.schemas.events import Event, to_millis

Strategy = st.SearchStrategy[Any]

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TIMESTAMPS = st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)).map(
    lambda moment: moment.replace(microsecond=moment.microsecond // 1000 * 1000)
)
PRIMITIVES: Mapping[str, Strategy] = {
    "null": st.none(),
    "boolean": st.booleans(),
    "int": INT32,
    "long": INT64,
    "float": st.floats(width=32, allow_nan=False),
    "double": st.floats(allow_nan=False),
    "string": st.text(max_size=20),
    "bytes": st.binary(max_size=20),
}
LOGICAL: Mapping[tuple[str, str], Strategy] = {("long", "timestamp-millis"): TIMESTAMPS}


def from_schema(schema: Any, overrides: Mapping[str, Strategy] | None = None) -> Strategy:
    """Values of an Avro schema; `overrides` replaces the strategy of fields named `Record.field` (short names)."""
    return _Builder(overrides or {}).build(schema)


class _Builder:
    """Walks one schema, remembering named types so later references to them resolve."""

    def __init__(self, overrides: Mapping[str, Strategy]) -> None:
        self.overrides = overrides
        self.named: dict[str, Strategy] = {}

    def build(self, schema: Any) -> Strategy:
        if isinstance(schema, list):
            return st.one_of([self.build(branch) for branch in schema])
        if isinstance(schema, str):
            return PRIMITIVES[schema] if schema in PRIMITIVES else self.named[schema.rsplit(".", 1)[-1]]
        kind = schema["type"]
        if (kind, schema.get("logicalType")) in LOGICAL:
            return LOGICAL[(kind, schema["logicalType"])]
        if kind == "record":
            return self._record(schema)
        if kind == "enum":
            return self._name(schema, st.sampled_from(schema["symbols"]))
        if kind == "array":
            return st.lists(self.build(schema["items"]), max_size=4)
        if kind == "map":
            return st.dictionaries(st.text(max_size=8), self.build(schema["values"]), max_size=4)
        if kind == "fixed":
            return self._name(schema, st.binary(min_size=schema["size"], max_size=schema["size"]))
        return self.build(kind)

    def _name(self, schema: Mapping[str, Any], strategy: Strategy) -> Strategy:
        self.named[schema["name"].rsplit(".", 1)[-1]] = strategy
        return strategy

    def _record(self, schema: Mapping[str, Any]) -> Strategy:
        record = schema["name"].rsplit(".", 1)[-1]
        self.named[record] = st.deferred(lambda: self.named[record])
        fields = {field["name"]: self._field(record, field) for field in schema["fields"]}
        return self._name(schema, st.fixed_dictionaries(fields))

    def _field(self, record: str, field: Mapping[str, Any]) -> Strategy:
        override = self.overrides.get(f"{record}.{field['name']}")
        return self.build(field["type"]) if override is None else override


NON_EMPTY_TEXT = st.text(min_size=1, max_size=20)
UNIT = st.floats(0.0, 1.0)


@st.composite
def task_graphs(draw: st.DrawFn, max_tokens: bool = False, check: bool = False) -> list[dict[str, Any]]:
    """Mission task lists: unique ids, each depending only on earlier tasks (so acyclic); with a max_tokens each
    (null or within the plan's bounds) and a cross-check rule (a judge capability with JUDGE only) when the TaskSpec
    version has the fields."""
    ids = draw(st.lists(NON_EMPTY_TEXT, max_size=4, unique=True))
    return [
        {
            "task_id": task_id,
            "prompt": draw(st.text(max_size=20)),
            "required_capabilities": draw(st.lists(st.text(max_size=8), max_size=3)),
            "depends_on": draw(st.lists(st.sampled_from(ids[:index]), unique=True)) if index else [],
            "replicas": draw(st.integers(1, 5)),
            "max_steps": draw(st.integers(1, 16)),
        }
        | ({"max_tokens": draw(st.none() | st.integers(MIN_TASK_TOKENS, MAX_TASK_TOKENS))} if max_tokens else {})
        | (draw(CHECKS) if check else {})
        for index, task_id in enumerate(ids)
    ]


CHECKS = st.sampled_from(["EQUAL", "VOTE"]).map(lambda rule: {"check": rule, "judge": None}) | st.text(
    min_size=1, max_size=8
).map(lambda capability: {"check": "JUDGE", "judge": capability})
"""A TaskSpec's cross-check rule as the plan rules accept it."""

CONSENSUS = st.fixed_dictionaries(
    {
        "strategy": st.sampled_from(["MAJORITY", "CONFIDENCE_WEIGHTED"]),
        "window_ms": st.integers(1, 2**63 - 1),
        "quorum": st.floats(0.0, 1.0, exclude_min=True),
    }
)
POSITIVE_OR_NULL = st.none() | st.integers(1, 2**63 - 1)

# Strategies for the fields the invariants constrain; the final filter catches what is left (e.g. orderings).
VALID_FIELDS: Mapping[str, Strategy] = {
    "event_id": NON_EMPTY_TEXT,
    "producer": NON_EMPTY_TEXT,
    "attempt": st.integers(1, 2**31 - 1),
    "replica": st.integers(0, 2**31 - 1),
    "slot": st.integers(0, 2**31 - 1),
    "reply_slot": st.integers(0, 2**31 - 1),
    "max_steps": st.integers(1, 2**31 - 1),
    "prompt_tokens": st.integers(0, 2**31 - 1),
    "completion_tokens": st.integers(0, 2**31 - 1),
    "tokens": st.integers(0, 2**63 - 1),
    "tokens_used": st.integers(0, 2**63 - 1),
    "used": st.integers(0, 2**63 - 1),
    "confidence": UNIT,
    "tasks": task_graphs(),
    "consensus": CONSENSUS,
    "deadline_ms": POSITIVE_OR_NULL,
    "token_budget": POSITIVE_OR_NULL,
    "embedding": st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=8),
    "ttl_s": st.integers(1, 2**31 - 1),
    "window_ms": st.integers(1, 2**63 - 1),
    "cycle": st.lists(NON_EMPTY_TEXT, min_size=1, max_size=4),
}


def _one_wait_per_edge(record: dict[str, Any]) -> dict[str, Any]:
    """A DeadlockDetected whose parallel lists are cut to the same length."""
    edges = min(len(record["cycle"]), len(record["wait_ids"]), len(record["waits_started_at"]))
    return record | {field: record[field][:edges] for field in ("cycle", "wait_ids", "waits_started_at")}


# Cross-field shapes the per-field strategies cannot express, by record name.
SHAPES: Mapping[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"DeadlockDetected": _one_wait_per_edge}


def event_of(name: str, record: Mapping[str, Any]) -> Event:
    """The event of a record drawn as plain values (timestamps as datetimes, as Apache Avro reads them)."""
    return records.from_fields(name, millis(record))


def millis(value: Any) -> Any:
    """The value with every datetime in it as int milliseconds since the epoch."""
    if isinstance(value, datetime):
        return to_millis(value)
    if isinstance(value, list):
        return [millis(item) for item in value]
    if isinstance(value, dict):
        return {key: millis(item) for key, item in value.items()}
    return value


def _keeps_invariants(name: str, record: Mapping[str, Any]) -> bool:
    try:
        invariants.check(event_of(name, record))
    except invariants.InvariantViolation:
        return False
    return True


def event_data(version: SchemaVersion) -> Strategy:
    """Field dicts for a schema version that match it and keep every invariant of its record."""
    fields = {field["name"] for field in version.schema["fields"]}
    overrides = {f"{version.name}.{field}": strategy for field, strategy in VALID_FIELDS.items() if field in fields}
    if (
        "tasks" in fields
    ):  # the TaskSpec has max_tokens from MissionSubmitted v3, MissionAccepted v3, PlanAdopted v2, MissionSplit v2 on,
        # and check and judge from the version after each
        text = json.dumps(version.schema)
        overrides[f"{version.name}.tasks"] = task_graphs(max_tokens='"max_tokens"' in text, check='"judge"' in text)
    values = from_schema(version.schema, overrides)
    if version.name in SHAPES:
        values = values.map(SHAPES[version.name])
    return values.filter(lambda record: _keeps_invariants(version.name, record))
