"""Checks that emitted events are valid records of their .avsc schemas (read with fastavro, not the project codec)."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import fastavro
import msgspec
from fastavro.validation import validate

from swarmlog.schemas.events import Event

AVRO = Path(__file__).resolve().parents[2] / "schemas" / "avro"


@functools.cache
def _schema(name: str) -> Any:
    """The parsed latest schema of a record name (the version the codec writes)."""
    latest = max((AVRO / name).glob("v*.avsc"), key=lambda path: int(path.stem[1:]))
    return fastavro.parse_schema(json.loads(latest.read_text()), named_schemas={})


def assert_conforms(event: Event) -> None:
    """Fail unless the event's fields are a valid record of its schema."""
    validate(msgspec.to_builtins(event, builtin_types=(bytes,)), _schema(event.name), raise_errors=True)
