"""The wire format: single-object encoding both ways with Apache Avro, invariants, and every way bytes go wrong."""

from __future__ import annotations

import contextlib
import functools
import graphlib
import io
import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

import avro.io
import avro.schema
import fastavro
import pytest
from avro_strategies import event_data, event_of
from fastavro.schema import to_parsing_canonical_form
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError, EncodeError
from swarmlog.schemas import invariants
from swarmlog.schemas.catalog import CRC64_EMPTY, crc64_avro, default_catalog
from swarmlog.schemas.codec import MAGIC, Codec, decode, decode_record, encode, without_logical_types
from swarmlog.schemas.confluent import ConfluentFraming
from swarmlog.schemas.events import Event, to_millis
from swarmlog.schemas.records import (
    AgentHeartbeat,
    ConsensusSpec,
    MissionSubmitted,
    TaskCrossChecked,
    TaskSpec,
    TaskStarted,
)

CATALOG = default_catalog()
NAMES = CATALOG.names()
PER_TYPE = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def apache_schema(name: str) -> avro.schema.Schema:
    """Apache Avro's parse of the latest version of a record."""
    return avro.schema.parse(json.dumps(CATALOG.latest(name).schema))


def apache_write(name: str, data: dict[str, Any]) -> bytes:
    """The Avro binary body Apache Avro writes."""
    buffer = io.BytesIO()
    avro.io.DatumWriter(apache_schema(name)).write(data, avro.io.BinaryEncoder(buffer))
    return buffer.getvalue()


def apache_read(name: str, body: bytes) -> dict[str, Any]:
    """What Apache Avro reads from a body, checking it consumes all of it."""
    buffer = io.BytesIO(body)
    data = avro.io.DatumReader(apache_schema(name), apache_schema(name)).read(avro.io.BinaryDecoder(buffer))
    assert buffer.tell() == len(body)
    return data


def single_object_header(name: str) -> bytes:
    """`C3 01` + the canonical fingerprint as fastavro computes it, independently of our catalog."""
    canonical = to_parsing_canonical_form(CATALOG.latest(name).schema)
    return MAGIC + bytes.fromhex(fastavro.schema.fingerprint(canonical, "CRC-64-AVRO"))


# --- fingerprints -------------------------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_crc64_avro_matches_apache_avro(data: bytes) -> None:
    assert crc64_avro(data).to_bytes(8, "little") == avro.schema._crc_64_fingerprint(data)


def test_crc64_avro_of_nothing_is_the_seed() -> None:
    assert crc64_avro(b"") == CRC64_EMPTY


@pytest.mark.parametrize("version", list(CATALOG), ids=lambda version: version.label)
def test_fingerprint_is_the_canonical_fingerprint_of_fastavro_and_apache(version: Any) -> None:
    canonical = to_parsing_canonical_form(version.schema)
    assert version.fingerprint.hex() == fastavro.schema.fingerprint(canonical, "CRC-64-AVRO")
    # Apache Avro for Python 1.12 writes a logical-typed primitive as {"type":"long"} in its canonical form, where
    # the spec and Java write "long"; without the annotations the two agree.
    apache = avro.schema.parse(json.dumps(without_logical_types(version.schema)))
    assert apache.canonical_form == canonical
    assert apache.fingerprint("CRC-64-AVRO") == version.fingerprint


# --- interoperability with Apache Avro, every event type ---------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
@PER_TYPE
@given(data=st.data())
def test_apache_avro_reads_what_swarmlog_writes(name: str, data: st.DataObject) -> None:
    record = data.draw(event_data(CATALOG.latest(name)))
    payload = encode(event_of(name, record))
    assert payload[:10] == single_object_header(name)
    assert apache_read(name, payload[10:]) == record
    assert decode(payload) == event_of(name, record)


@pytest.mark.parametrize("name", NAMES)
@PER_TYPE
@given(data=st.data())
def test_swarmlog_reads_what_apache_avro_writes(name: str, data: st.DataObject) -> None:
    record = data.draw(event_data(CATALOG.latest(name)))
    assert decode(single_object_header(name) + apache_write(name, record)) == event_of(name, record)


# --- bytes that are not an event ---------------------------------------------------------------------------


def sample_payload() -> bytes:
    """A valid TaskStarted in single-object encoding."""
    return encode(TaskStarted(**task_started()))


def task_started(**changes: Any) -> dict[str, Any]:
    """A valid TaskStarted record, with some fields changed."""
    record = {
        "event_id": "e-1",
        "occurred_at": to_millis(datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)),
        "correlation_id": "m-1",
        "causation_id": None,
        "producer": "agent:a-1",
        "mission_id": "m-1",
        "task_id": "t-1",
        "replica": 0,
        "attempt": 1,
        "agent_id": "a-1",
        "ground_truth_version": 3,
    }
    return record | changes


@pytest.mark.parametrize(
    ("payload", "reason"),
    [
        (b"", "empty payload"),
        (b"\xc3\x01\x00\x01", "4 bytes: too short"),
        (b"\x00" * 30, "wrong magic 00 00"),
        (b"\xc3\x01" + bytes.fromhex("0123456789abcdef") + b"\x00", "unknown schema fingerprint 0123456789abcdef"),
        (sample_payload()[:-1], "truncated TaskStarted v1 body"),
        (sample_payload()[:11], "truncated TaskStarted v1 body"),
        (sample_payload() + b"\x00\x00", "2 trailing bytes after the TaskStarted v1 body"),
        (sample_payload()[:10] + b"\x02x" * 3 + b"\xff" * 12, "malformed TaskStarted v1 body"),
    ],
    ids=["empty", "short header", "wrong magic", "unknown fingerprint", "cut", "header only", "trailing", "garbage"],
)
def test_undecodable_bytes_raise_decode_error_with_the_reason(payload: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as caught:
        decode(payload)
    assert reason in caught.value.reason


def test_decode_record_locates_the_error() -> None:
    with pytest.raises(DecodeError) as caught:
        decode_record(b"junk", "swarm.tasks.events", 3, 42)
    assert (caught.value.topic, caught.value.partition, caught.value.offset) == ("swarm.tasks.events", 3, 42)
    assert "swarm.tasks.events[3]@42" in str(caught.value)


def test_decode_record_decodes_a_valid_record() -> None:
    assert decode_record(sample_payload(), "swarm.tasks.events", 0, 0).name == "TaskStarted"


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=10, deadline=None)
@given(body=st.binary(max_size=64))
def test_any_body_decodes_or_raises_decode_error(name: str, body: bytes) -> None:
    with contextlib.suppress(DecodeError):
        decode(MAGIC + CATALOG.latest(name).fingerprint + body)


def test_a_record_that_breaks_an_invariant_does_not_decode() -> None:
    buffer = io.BytesIO(MAGIC + CATALOG.latest("TaskStarted").fingerprint)
    buffer.seek(0, io.SEEK_END)
    fastavro.schemaless_writer(buffer, CATALOG.latest("TaskStarted").parsed, task_started(attempt=0))
    with pytest.raises(DecodeError, match="TaskStarted v1 breaks an invariant: attempt must be at least 1, got 0"):
        decode(buffer.getvalue())


# --- records that cannot be written ------------------------------------------------------------------------


def without(field: str) -> dict[str, Any]:
    """A TaskStarted record missing one field."""
    record = task_started()
    del record[field]
    return record


class TaskBegun(Event, frozen=True):
    """An event class with no schema."""

    name: ClassVar[str] = "TaskBegun"


class LooseTaskStarted(Event, frozen=True):
    """A look-alike of TaskStarted that is not its generated class."""

    name: ClassVar[str] = "TaskStarted"


@pytest.mark.parametrize(
    ("event", "message"),
    [
        (TaskBegun(), "no schema for event 'TaskBegun'"),
        (LooseTaskStarted(), "LooseTaskStarted is not the class of TaskStarted events"),
        (TaskStarted(**task_started(task_id=None)), "swarmlog.v1.TaskStarted.task_id) is None expected string"),
        (TaskStarted(**task_started(attempt="1")), "swarmlog.v1.TaskStarted.attempt is <1>"),
        (TaskStarted(**task_started(attempt=2**31)), "swarmlog.v1.TaskStarted.attempt"),
        (TaskStarted(**task_started(producer="")), "breaks an invariant: producer must not be empty"),
    ],
    ids=["unknown event", "not the generated class", "missing value", "wrong type", "int overflow", "invariant"],
)
def test_bad_records_raise_encode_error_naming_the_field(event: Event, message: str) -> None:
    with pytest.raises(EncodeError, match=re.escape(message)):
        encode(event)


def test_fields_a_class_lacks_or_misses_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="gpu"):
        TaskStarted(**task_started(gpu=0))
    with pytest.raises(TypeError, match="task_id"):
        TaskStarted(**without("task_id"))


def test_omitted_defaulted_fields_are_written_with_their_defaults() -> None:
    assert decode(encode(TaskStarted(**without("causation_id")))) == TaskStarted(**task_started())


# --- invariants --------------------------------------------------------------------------------------------


def task(task_id: str, depends_on: list[str] | None = None, replicas: int = 1) -> dict[str, Any]:
    """A TaskSpec."""
    return {
        "task_id": task_id,
        "prompt": "p",
        "required_capabilities": [],
        "depends_on": depends_on or [],
        "replicas": replicas,
        "max_steps": 4,
    }


BROKEN: list[tuple[str, Callable[[dict[str, Any]], dict[str, Any]], str]] = [
    ("MissionSubmitted", lambda r: r | {"tasks": [task("a"), task("a")]}, "task ids must be unique"),
    ("MissionSubmitted", lambda r: r | {"tasks": [task("a", ["b"])]}, "depends on unknown tasks ['b']"),
    ("MissionSubmitted", lambda r: r | {"tasks": [task("a", ["b"]), task("b", ["a"])]}, "cycle: a -> b -> a"),
    ("MissionSubmitted", lambda r: r | {"tasks": [task("a", ["a"])]}, "cycle: a -> a"),
    ("MissionSubmitted", lambda r: r | {"tasks": [task("a", replicas=0)]}, "at least 1 replica"),
    ("MissionSubmitted", lambda r: r | {"tasks": [], "planning": None}, "at least one task or a planning spec"),
    ("MissionSubmitted", lambda r: r | {"consensus": r["consensus"] | {"window_ms": 0}}, "window_ms must be positive"),
    ("MissionSubmitted", lambda r: r | {"consensus": r["consensus"] | {"quorum": 0.0}}, "quorum must be in (0, 1]"),
    ("MissionSubmitted", lambda r: r | {"consensus": r["consensus"] | {"quorum": 1.5}}, "quorum must be in (0, 1]"),
    ("MissionSubmitted", lambda r: r | {"deadline_ms": 0}, "deadline_ms must be positive"),
    ("MissionSubmitted", lambda r: r | {"token_budget": -1}, "token_budget must be positive"),
    ("MissionAccepted", lambda r: r | {"tasks": [task("a", ["a"])]}, "cycle"),
    ("TaskCompleted", lambda r: r | {"confidence": 1.5}, "confidence must be in [0, 1]"),
    ("TaskCompleted", lambda r: r | {"prompt_tokens": -1}, "prompt_tokens must be at least 0"),
    ("TaskAssigned", lambda r: r | {"slot": -1}, "slot must be at least 0"),
    ("TaskFailed", lambda r: r | {"replica": -1}, "replica must be at least 0"),
    ("TokensUsed", lambda r: r | {"completion_tokens": -5}, "completion_tokens must be at least 0"),
    ("ExperienceRecorded", lambda r: r | {"embedding": []}, "embedding must not be empty"),
    ("ExperienceRecorded", lambda r: r | {"ttl_s": 0}, "ttl_s must be positive"),
    ("DeadlockDetected", lambda r: r | {"cycle": [], "wait_ids": []}, "cycle must not be empty"),
    ("DeadlockDetected", lambda r: r | {"wait_ids": r["wait_ids"] + ["w"]}, "wait_ids must have one entry per edge"),
    ("DeadlockDetected", lambda r: r | {"waits_started_at": []}, "waits_started_at must have one entry per edge"),
    ("BudgetExceeded", lambda r: r | {"window_end": r["window_start"]}, "must be after window_start"),
    ("VoteCast", lambda r: r | {"event_id": ""}, "event_id must not be empty"),
    ("BudgetWindowSet", lambda r: r | {"window_ms": 0}, "window_ms must be at least 1"),
]


@pytest.mark.parametrize(("name", "breaks", "reason"), BROKEN, ids=[reason for _, _, reason in BROKEN])
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_invariants_reject_broken_records(
    name: str, breaks: Callable[[dict[str, Any]], dict[str, Any]], reason: str, data: st.DataObject
) -> None:
    event = event_of(name, breaks(data.draw(event_data(CATALOG.latest(name)))))
    with pytest.raises(invariants.InvariantViolation) as caught:
        invariants.check(event)
    assert reason in caught.value.reason
    with pytest.raises(EncodeError, match="breaks an invariant"):
        encode(event)


def test_a_null_optional_field_has_no_bound_to_break() -> None:
    tie_break = stamp(
        TaskCrossChecked,
        producer="coordinator:region-0",
        mission_id="m",
        task_id="t",
        outcome="TIE_BREAK",
        support=1,
        replica=None,
        tie_breaker=3,
    )

    invariants.check(tie_break)
    assert decode(encode(tie_break)) == tie_break


@st.composite
def dependency_graphs(draw: st.DrawFn) -> dict[str, list[str]]:
    """Any dependencies among a few task ids, cycles included."""
    ids = draw(st.lists(st.sampled_from("abcdef"), min_size=1, unique=True))
    return {task_id: draw(st.lists(st.sampled_from(ids), unique=True, max_size=3)) for task_id in ids}


@given(graph=dependency_graphs())
def test_cycle_check_agrees_with_graphlib(graph: dict[str, list[str]]) -> None:
    mission = MissionSubmitted(
        event_id="e",
        occurred_at=0,
        producer="p",
        mission_id="m",
        title="t",
        submitted_by="me",
        tasks=[TaskSpec(task_id, "p", depends_on=deps) for task_id, deps in graph.items()],
        consensus=ConsensusSpec("MAJORITY", window_ms=1, quorum=0.5),
    )
    try:
        tuple(graphlib.TopologicalSorter(graph).static_order())
        acyclic = True
    except graphlib.CycleError:
        acyclic = False
    try:
        invariants.check(mission)
        assert acyclic
    except invariants.InvariantViolation as violation:
        assert not acyclic and "cycle" in violation.reason


# --- the Confluent wire format ------------------------------------------------------------------------------


class InMemoryRegistry:
    """A schema registry in a dict, for testing the framing without a server."""

    def __init__(self) -> None:
        self.schemas: dict[int, str] = {}

    def register(self, subject: str, schema: str) -> int:
        for schema_id, known in self.schemas.items():
            if known == schema:
                return schema_id
        schema_id = 100 + len(self.schemas)
        self.schemas[schema_id] = schema
        return schema_id

    def schema(self, schema_id: int) -> str | None:
        return self.schemas.get(schema_id)


@pytest.fixture
def confluent() -> Iterator[Codec]:
    yield Codec(CATALOG, ConfluentFraming(InMemoryRegistry()))


def test_confluent_framing_round_trips_with_a_big_endian_schema_id(confluent: Codec) -> None:
    payload = confluent.encode(TaskStarted(**task_started()))
    assert payload[:5] == b"\x00\x00\x00\x00\x64"
    assert payload[5:] == sample_payload()[10:]
    assert confluent.decode(payload) == decode(sample_payload())


@pytest.mark.parametrize(
    ("payload", "reason"),
    [(b"\x00\x00", "too short for a Confluent header"), (b"\x00\x00\x00\x01\x00\x00", "schema id 256 is not")],
)
def test_confluent_framing_rejects_bad_headers(confluent: Codec, payload: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        confluent.decode(payload)


def test_confluent_codec_refuses_single_object_bytes(confluent: Codec) -> None:
    with pytest.raises(DecodeError, match="wrong magic c3"):
        confluent.decode(sample_payload())


def test_the_compiled_and_the_python_readers_decode_alike():
    heartbeat = stamp(
        AgentHeartbeat,
        producer="agent:a",
        agent_id="a",
        registration_id="r",
        sequence=2**40,
        status="BUSY",
        in_flight_task="m/t/0/1",
        region="region-0",
        slot=3,
    )
    payload = Codec(default_catalog()).encode(heartbeat)
    assert Codec(default_catalog()).decode(payload) == Codec(default_catalog(), compiled=False).decode(payload)
