"""Encode/decode throughput over the whole catalog: fastavro vs Apache Avro (same single-object framing), and our codec
with its generated writers and compiled readers, and without the writers and with the generated Python readers.

Run: python bench/codec_bench.py [--iterations N]
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import avro.io
import avro.schema
import fastavro
from rich.console import Console
from rich.table import Table

from swarmlog.schemas.catalog import SchemaVersion, default_catalog
from swarmlog.schemas.codec import MAGIC, Codec, default_codec

EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
Apache = tuple[bytes, avro.io.DatumWriter, avro.io.DatumReader]  # header, writer, reader of one record


class Sampler:
    """Deterministic, realistic-sized values of a schema that keep the invariants (distinct ids, growing times)."""

    def __init__(self) -> None:
        self._counter = itertools.count(1)

    def value(self, schema: Any, field: str = "value") -> Any:
        """A value of `schema` for a field called `field`."""
        n = next(self._counter)
        if isinstance(schema, list):
            return self.value(next(branch for branch in schema if branch != "null"), field)
        if isinstance(schema, dict) and schema.get("logicalType") == "timestamp-millis":
            return EPOCH + timedelta(seconds=n)
        kind = schema["type"] if isinstance(schema, dict) else schema
        if kind == "record":
            return {f["name"]: self.value(f["type"], f["name"]) for f in schema["fields"]}
        if kind == "array":
            return [] if field == "depends_on" else [self.value(schema["items"], field) for _ in range(3)]
        if kind == "map":
            return {f"{field}-{i}": self.value(schema["values"], field) for i in range(2)}
        if kind == "enum":
            return schema["symbols"][0]
        scalars = {
            "string": f"{field}-{n}",
            "int": n % 100 + 1,
            "long": n + 1000,
            "boolean": True,
            "bytes": b"\x01" * 16,
        }
        return (scalars | {"float": 0.25, "double": 0.5})[kind]


def samples() -> Iterator[tuple[SchemaVersion, dict[str, Any]]]:
    """One sample per event type (valid: main decodes each, which checks the invariants)."""
    sampler = Sampler()
    for name in default_catalog().names():
        version = default_catalog().latest(name)
        yield version, sampler.value(version.schema)


def rate(operation: Callable[[Any, Any], object], inputs: list[tuple[Any, Any]], iterations: int) -> float:
    """Calls per second of `operation` over all inputs, `iterations` times."""
    start = time.perf_counter()
    for _ in range(iterations):
        for first, second in inputs:
            operation(first, second)
    return iterations * len(inputs) / (time.perf_counter() - start)


def fastavro_encode(version: SchemaVersion, record: dict[str, Any]) -> bytes:
    """Single-object bytes written by fastavro."""
    buffer = io.BytesIO()
    buffer.write(MAGIC + version.fingerprint)
    fastavro.schemaless_writer(buffer, version.parsed, record)
    return buffer.getvalue()


def fastavro_decode(version: SchemaVersion, payload: bytes) -> object:
    """The record fastavro reads from single-object bytes."""
    buffer = io.BytesIO(payload)
    buffer.seek(10)
    return fastavro.schemaless_reader(buffer, version.parsed, None)


def apache_encode(apache: Apache, record: dict[str, Any]) -> bytes:
    """Single-object bytes written by Apache Avro."""
    buffer = io.BytesIO()
    buffer.write(apache[0])
    apache[1].write(record, avro.io.BinaryEncoder(buffer))
    return buffer.getvalue()


def apache_decode(apache: Apache, payload: bytes) -> object:
    """The record Apache Avro reads from single-object bytes."""
    buffer = io.BytesIO(payload)
    buffer.seek(10)
    return apache[2].read(avro.io.BinaryDecoder(buffer))


def main() -> None:
    """Measure and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=500, help="passes over the catalog per measurement")
    iterations = parser.parse_args().iterations
    codec = default_codec()
    pairs = list(samples())
    apaches = []
    for version, _ in pairs:
        schema = avro.schema.parse(json.dumps(version.schema))
        apaches.append((MAGIC + version.fingerprint, avro.io.DatumWriter(schema), avro.io.DatumReader(schema, schema)))
    payloads = [fastavro_encode(version, record) for version, record in pairs]
    events = [(codec.decode(payload), None) for payload in payloads]

    fast = {
        "encode": rate(fastavro_encode, pairs, iterations),
        "decode": rate(fastavro_decode, [(v, p) for (v, _), p in zip(pairs, payloads, strict=False)], iterations),
    }
    slow = {
        "encode": rate(apache_encode, [(a, r) for a, (_, r) in zip(apaches, pairs, strict=False)], iterations),
        "decode": rate(apache_decode, list(zip(apaches, payloads, strict=False)), iterations),
    }
    ours = {
        "encode": rate(lambda event, _: codec.encode(event), events, iterations),
        "decode": rate(lambda payload, _: codec.decode(payload), [(p, None) for p in payloads], iterations),
    }
    python = Codec(default_catalog(), compiled=False, generated_writers=False)
    pure = {
        "encode": rate(lambda event, _: python.encode(event), events, iterations),
        "decode": rate(lambda payload, _: python.decode(payload), [(p, None) for p in payloads], iterations),
    }
    for measured in (fast, slow, ours, pure):
        measured["encode + decode"] = 1 / (1 / measured["encode"] + 1 / measured["decode"])

    table = Table(title=f"{len(pairs)} event types x {iterations} iterations, single-object framing, one core")
    for column in (
        "direction",
        "fastavro ev/s",
        "Apache avro ev/s",
        "fastavro / Apache",
        "swarmlog codec ev/s",
        "swarmlog / fastavro",
        "swarmlog, no generated writers, Python readers ev/s",
        "swarmlog / that",
    ):
        table.add_column(column, justify="left" if column == "direction" else "right")
    for direction in ("encode", "decode", "encode + decode"):
        table.add_row(
            direction,
            f"{fast[direction]:,.0f}",
            f"{slow[direction]:,.0f}",
            f"{fast[direction] / slow[direction]:.1f}x",
            f"{ours[direction]:,.0f}",
            f"{ours[direction] / fast[direction]:.2f}x",
            f"{pure[direction]:,.0f}",
            f"{ours[direction] / pure[direction]:.2f}x",
        )
    Console(width=140).print(table)
    Console().print(
        "swarmlog codec = on encode the writers generated per schema (fastavro validates and writes what they "
        "doubt) + invariants, or without them fastavro + validation + invariants; on decode the readers generated "
        "per schema (compiled, or in Python) + invariants, fastavro for older versions"
    )


if __name__ == "__main__":
    main()
