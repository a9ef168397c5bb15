"""The generated readers, in Python and compiled, read every body exactly as fastavro does, and doubt (never misread)
bytes that are not one."""

from __future__ import annotations

import io

import fastavro
import pytest
from avro_strategies import from_schema
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from swarmlog.schemas import native
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.compiled import compile_reader

CATALOG = default_catalog()
VERSIONS = list(CATALOG)
LATEST = [CATALOG.latest(name) for name in sorted(CATALOG.names())]
BUILT = native.readers()


def fastavro_read(version, body: bytes) -> tuple[dict, int]:
    buffer = io.BytesIO(body)
    return fastavro.schemaless_reader(buffer, version.parsed, None), buffer.tell()


@pytest.mark.parametrize("version", VERSIONS, ids=lambda version: version.label)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_generated_reader_reads_what_fastavro_reads(version, data):
    record = data.draw(from_schema(version.schema))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, version.parsed, record)
    body = buffer.getvalue()
    assert compile_reader(version.schema)(body, 0) == fastavro_read(version, body)


@pytest.mark.parametrize("version", VERSIONS, ids=lambda version: version.label)
@settings(max_examples=40, deadline=None)
@given(body=st.binary(max_size=64))
def test_on_garbage_a_generated_reader_agrees_with_fastavro_or_raises(version, body):
    try:
        ours = compile_reader(version.schema)(body, 0)
    except Exception:
        return
    assert ours == fastavro_read(version, body)


def test_the_compiled_module_is_built_from_the_current_schemas():
    assert native.SOURCE.read_text(encoding="utf-8") == native.source(CATALOG), \
        "schemas/_readers.pyx is out of date: run python -m swarmlog.schemas.native --write, then make setup"
    missing = [version.label for version in LATEST if version.fingerprint not in BUILT]
    assert not missing, f"no compiled reader for {missing}: rebuild the extension with make setup (needs a C compiler)"


@pytest.mark.parametrize("version", LATEST, ids=lambda version: version.label)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_a_compiled_reader_reads_what_fastavro_reads(version, data):
    record = data.draw(from_schema(version.schema))
    buffer = io.BytesIO()
    fastavro.schemaless_writer(buffer, version.parsed, record)
    body = b"head" + buffer.getvalue()
    expected, size = fastavro_read(version, body[4:])
    assert BUILT[version.fingerprint](body, 4) == (expected, 4 + size)


@pytest.mark.parametrize("version", LATEST, ids=lambda version: version.label)
@settings(max_examples=40, deadline=None)
@given(body=st.binary(max_size=64))
def test_on_garbage_a_compiled_reader_agrees_with_fastavro_or_raises(version, body):
    try:
        ours = BUILT[version.fingerprint](body, 0)
    except Exception:
        return
    assert ours == fastavro_read(version, body)
