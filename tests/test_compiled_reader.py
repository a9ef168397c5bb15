"""The generated readers, in Python and compiled, read every body exactly as fastavro does, and doubt (never misread)
bytes that are not one."""

from __future__ import annotations

import io

import fastavro
import msgspec
import pytest
from avro_strategies import from_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmlog.schemas import native, records
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import without_logical_types
from swarmlog.schemas.compiled import compile_reader
from swarmlog.schemas.events import Event

CATALOG = default_catalog()
LATEST = [CATALOG.latest(name) for name in sorted(CATALOG.names())]
BUILT = native.readers()
# The latest versions have a generated reader, in Python and compiled (older versions are resolved by fastavro).
READERS = [
    pytest.param(version, lambda v: compile_reader(v.schema), id=f"{version.label} python") for version in LATEST
] + [pytest.param(version, lambda v: BUILT[v.fingerprint], id=f"{version.label} compiled") for version in LATEST]


def fastavro_read(version, body: bytes) -> tuple[Event, int]:
    """The event fastavro reads (timestamps as int milliseconds), and where the body ends."""
    buffer = io.BytesIO(body)
    data = fastavro.schemaless_reader(buffer, fastavro.parse_schema(without_logical_types(version.schema)), None)
    return msgspec.convert(data, records.CLASSES[version.name]), buffer.tell()


def test_the_compiled_module_is_built_from_the_current_schemas():
    assert native.SOURCE.read_text(encoding="utf-8") == native.source(CATALOG), (
        "schemas/_readers.pyx is out of date: run python -m swarmlog.schemas.native --write, then make setup"
    )
    missing = [version.label for version in LATEST if version.fingerprint not in BUILT]
    assert not missing, f"no compiled reader for {missing}: rebuild the extension with make setup (needs a C compiler)"


@pytest.mark.parametrize(("version", "reader_of"), READERS)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_generated_reader_reads_what_fastavro_reads(version, reader_of, data):
    record = data.draw(from_schema(version.schema))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, version.parsed, record)
    body = b"head" + buffer.getvalue()  # read from an offset, as the codec reads past the header
    expected, size = fastavro_read(version, body[4:])
    assert reader_of(version)(body, 4) == (expected, 4 + size)


@pytest.mark.parametrize(("version", "reader_of"), READERS)
@settings(max_examples=40, deadline=None)
@given(body=st.binary(max_size=64))
def test_on_garbage_a_generated_reader_agrees_with_fastavro_or_raises(version, reader_of, body):
    try:
        ours = reader_of(version)(body, 0)
    except Exception:
        return
    assert ours == fastavro_read(version, body)
