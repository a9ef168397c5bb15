"""Events to bytes and back: Avro single-object encoding, schema resolution into the latest version's class,
invariants."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from io import BytesIO
from types import ModuleType
from typing import Any, Protocol

import msgspec
from fastavro import parse_schema, schemaless_reader, schemaless_writer
from fastavro.types import Schema
from fastavro.validation import ValidationError, validate

from swarmlog.errors import DecodeError, EncodeError
from swarmlog.schemas import native, records, typed
from swarmlog.schemas.catalog import SchemaCatalog, SchemaVersion, default_catalog
from swarmlog.schemas.compiled import Reader, Unsupported, compile_reader
from swarmlog.schemas.compiled_writer import Writer, compile_writer
from swarmlog.schemas.confluent import ConfluentFraming, HttpSchemaRegistry
from swarmlog.schemas.events import Event
from swarmlog.schemas.invariants import Check, InvariantViolation, checks_for

MAGIC = b"\xc3\x01"
HEADER_SIZE = len(MAGIC) + 8


class Framing(Protocol):
    """How a schema is named in front of an Avro binary body."""

    def header(self, version: SchemaVersion) -> bytes:
        """The bytes written before a body written with `version`."""

    def split(self, payload: bytes) -> tuple[bytes, int]:
        """The writer's fingerprint and where the body starts; DecodeError when the header is not valid."""


class SingleObjectFraming:
    """Avro single-object encoding: `C3 01`, the 8-byte little-endian CRC-64-AVRO fingerprint, the body."""

    def header(self, version: SchemaVersion) -> bytes:
        """`C3 01` followed by the version's fingerprint."""
        return MAGIC + version.fingerprint

    def split(self, payload: bytes) -> tuple[bytes, int]:
        """The fingerprint of a single-object header, and 10."""
        if len(payload) < HEADER_SIZE:
            what = "empty payload" if not payload else f"{len(payload)} bytes"
            raise DecodeError(f"{what}: too short for a single-object header (C3 01 + 8-byte fingerprint)")
        if payload[:2] != MAGIC:
            raise DecodeError(f"wrong magic {payload[:2].hex(' ')}: not Avro single-object encoding (C3 01)")
        return payload[2:HEADER_SIZE], HEADER_SIZE


@dataclasses.dataclass(frozen=True, slots=True)
class _Plan:
    """What encoding or decoding with one writer version needs, computed once."""

    name: str
    version: SchemaVersion
    cls: type[Event]
    writer: Schema
    raw_writer: Schema
    raw_reader: Schema | None
    """The writer and reader schemas without logical types: fastavro reads timestamps as int milliseconds with them."""
    checks: tuple[Check, ...]
    fast: Reader | None
    """The generated reader of bodies written with the latest version, compiled where built (older versions are
    resolved by fastavro)."""
    fast_writer: Writer | None
    """The generated writer of the latest version's bodies (events are encoded with the latest version only)."""


def _plan(
    written: SchemaVersion,
    latest: SchemaVersion,
    compiled: Mapping[bytes, Reader],
    classes: ModuleType,
    generated_writer: bool,
) -> _Plan:
    """How to encode or decode with `written`, reading into `latest`'s class in `classes` (with its reader in
    `compiled` if there), writing the latest with a generated writer if asked."""
    fields = latest.schema["fields"]
    return _Plan(
        name=latest.name,
        version=written,
        cls=classes.CLASSES[latest.name],
        writer=written.parsed,
        raw_writer=parse_schema(without_logical_types(written.schema), _write_hint=False),
        raw_reader=None if written is latest else parse_schema(without_logical_types(latest.schema), _write_hint=False),
        checks=checks_for(latest.name, [field["name"] for field in fields]),
        fast=(compiled.get(written.fingerprint) or _generated(written, classes)) if written is latest else None,
        fast_writer=_generated_writer(written, classes) if written is latest and generated_writer else None,
    )


def without_logical_types(schema: Any) -> Any:
    """The schema (JSON form) with every logicalType dropped: values read as their underlying type."""
    if isinstance(schema, list):
        return [without_logical_types(item) for item in schema]
    if isinstance(schema, dict):
        return {key: without_logical_types(value) for key, value in schema.items() if key != "logicalType"}
    return schema


def _generated(version: SchemaVersion, classes: ModuleType) -> Reader | None:
    try:
        return compile_reader(version.schema, classes)
    except Unsupported:
        return None


def _generated_writer(version: SchemaVersion, classes: ModuleType) -> Writer | None:
    try:
        return compile_writer(version.schema, classes)
    except Unsupported:
        return None


class Codec:
    """Encodes events with the latest version of their schema and decodes any kept version into the latest."""

    def __init__(
        self,
        catalog: SchemaCatalog,
        framing: Framing | None = None,
        *,
        compiled: bool = True,
        generated_writers: bool = True,
    ) -> None:
        """`compiled=False` reads with the generated Python readers even where the Cython build of them exists;
        `generated_writers=False` validates and writes every event with fastavro."""
        self._framing = framing or SingleObjectFraming()
        classes = typed.classes_of(catalog)
        built = native.readers() if compiled and classes is records else {}
        self._readers = {
            version.fingerprint: _plan(version, catalog.latest(version.name), built, classes, generated_writers)
            for version in catalog
        }
        self._writers = {name: self._readers[catalog.latest(name).fingerprint] for name in catalog.names()}

    def encode(self, event: Event) -> bytes:
        """The framed bytes of an event; EncodeError naming the field when it does not match or breaks a rule."""
        plan = self._writers.get(event.name)
        if plan is None:
            raise EncodeError(f"no schema for event {event.name!r}; add schemas/avro/{event.name}/v1.avsc")
        if type(event) is not plan.cls:
            raise EncodeError(f"{type(event).__name__} is not the class of {event.name} events")
        header = self._framing.header(plan.version)
        written = self._write_fast(plan, event, header)
        data = None
        if written is None:  # a value the generated writer doubts: fastavro validates it, and says what is wrong
            data = msgspec.to_builtins(event, builtin_types=(bytes,))
            try:
                validate(data, plan.writer, raise_errors=True)
            except ValidationError as exc:
                raise EncodeError(
                    f"{event.name} does not match its schema: {'; '.join(map(str, exc.errors))}"
                ) from None
        try:
            for check in plan.checks:
                check(event)
        except InvariantViolation as exc:
            raise EncodeError(f"{event.name} breaks an invariant: {exc.reason}") from None
        if written is not None:
            return bytes(written)
        buffer = BytesIO()
        buffer.write(header)
        schemaless_writer(buffer, plan.writer, data)
        return buffer.getvalue()

    @staticmethod
    def _write_fast(plan: _Plan, event: Event, header: bytes) -> bytearray | None:
        """The header and body written by the generated writer; None where it has none or doubts a value."""
        if plan.fast_writer is None:
            return None
        out = bytearray(header)
        try:
            plan.fast_writer(event, out)
        except Exception:  # any doubt (a type, a range, an encoding) goes to fastavro, which explains it
            return None
        return out

    def decode(self, payload: bytes) -> Event:
        """The event in these bytes, read into the latest schema version; DecodeError saying why not."""
        fp, start = self._framing.split(payload)
        plan = self._readers.get(fp)
        if plan is None:
            raise DecodeError(
                f"unknown schema fingerprint {fp.hex()}: written with a schema this build does not keep; "
                "upgrade swarmlog or check the producer"
            )
        event = None
        if plan.fast is not None:  # the generated reader; on any doubt about the bytes fastavro reads them again
            try:
                event, end = plan.fast(payload, start)
            except Exception:
                event = None
            else:
                event = event if end == len(payload) else None
        if event is None:
            event = self._read(plan, payload, start)
        try:
            for check in plan.checks:
                check(event)
        except InvariantViolation as exc:
            raise DecodeError(f"{plan.version.label} breaks an invariant: {exc.reason}") from None
        return event

    @staticmethod
    def _read(plan: _Plan, payload: bytes, start: int) -> Event:
        """The body read by fastavro, resolved into the latest version; DecodeError saying what is wrong with it."""
        buffer = BytesIO(payload)
        buffer.seek(start)
        try:
            data = schemaless_reader(buffer, plan.raw_writer, plan.raw_reader)
        except Exception as exc:  # fastavro raises whatever its parsers hit on bytes that are not this schema
            problem = "truncated" if buffer.tell() >= len(payload) else "malformed"
            raise DecodeError(
                f"{problem} {plan.version.label} body ({len(payload) - start} bytes): {type(exc).__name__}: {exc}"
            ) from None
        if buffer.tell() != len(payload):
            raise DecodeError(f"{len(payload) - buffer.tell()} trailing bytes after the {plan.version.label} body")
        return msgspec.convert(data, plan.cls)

    def decode_record(self, payload: bytes, topic: str, partition: int, offset: int) -> Event:
        """`decode`, with the record's log coordinates on any DecodeError."""
        try:
            return self.decode(payload)
        except DecodeError as exc:
            raise exc.at(topic, partition, offset) from None


@functools.lru_cache(maxsize=1)
def default_codec() -> Codec:
    """The single-object codec over the shipped catalog (built once)."""
    return Codec(default_catalog())


def codec_for(schema_registry_url: str | None) -> Codec:
    """Single-object encoding, or the Confluent wire format when `Settings.schema_registry_url` is set."""
    if schema_registry_url is None:
        return default_codec()
    return Codec(default_catalog(), ConfluentFraming(HttpSchemaRegistry(schema_registry_url)))


def encode(event: Event) -> bytes:
    """Single-object bytes of an event, written with the latest version of its schema."""
    return default_codec().encode(event)


def decode(payload: bytes) -> Event:
    """The event in single-object bytes, read into the latest version of its schema."""
    return default_codec().decode(payload)


def decode_record(payload: bytes, topic: str, partition: int, offset: int) -> Event:
    """`decode`, locating any DecodeError at the record's topic, partition and offset."""
    return default_codec().decode_record(payload, topic, partition, offset)
