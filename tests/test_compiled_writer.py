"""The generated writers write every event exactly as fastavro writes it, and doubt (never miswrite) a value that
does not have its schema's Python type."""

from __future__ import annotations

import io
from typing import Any

import fastavro
import msgspec
import pytest
from avro_strategies import event_of, from_schema
from fastavro.validation import validate
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.compiled_writer import compile_writer
from swarmlog.schemas.events import Event

CATALOG = default_catalog()
LATEST = [pytest.param(CATALOG.latest(name), id=CATALOG.latest(name).label) for name in sorted(CATALOG.names())]
WRITERS = {version.name: compile_writer(version.schema) for version in map(CATALOG.latest, CATALOG.names())}
ODD_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=4), st.binary(max_size=4),
    st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
    st.integers(min_value=2**31 - 2, max_value=2**31 + 2), st.integers(min_value=2**63 - 2, max_value=2**63 + 2),
    st.just("\ud800"), st.just(object()),
)  # fmt: skip


def fastavro_body(version, event: Event) -> bytes:
    """What fastavro's schemaless_writer writes for the event's builtins."""
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, version.parsed, msgspec.to_builtins(event, builtin_types=(bytes,)))
    return buffer.getvalue()


def ours(event: Event) -> bytes:
    out = bytearray()
    WRITERS[event.name](event, out)
    return bytes(out)


def test_every_latest_version_has_a_generated_writer_in_the_codec():
    plans = [default_codec()._writers[name] for name in CATALOG.names()]
    assert [plan.version.label for plan in plans if plan.fast_writer is None] == []


@pytest.mark.parametrize("version", LATEST)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_generated_writer_writes_what_fastavro_writes(version, data):
    event = event_of(version.name, data.draw(from_schema(version.schema)))
    assert ours(event) == fastavro_body(version, event)


@pytest.mark.parametrize("version", LATEST)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_value_of_another_type_is_doubted_or_written_as_fastavro_would(version, data):
    event = event_of(version.name, data.draw(from_schema(version.schema)))
    field = data.draw(st.sampled_from([field["name"] for field in version.schema["fields"]]))
    odd: Any = data.draw(ODD_VALUES)
    event = msgspec.structs.replace(event, **{field: odd})
    try:
        written = ours(event)
    except Exception:
        return
    assert validate(msgspec.to_builtins(event, builtin_types=(bytes,)), version.parsed, raise_errors=False)
    assert written == fastavro_body(version, event)
