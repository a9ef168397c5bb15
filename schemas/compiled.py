"""Avro binary bodies read by Python source generated once per schema: the fast path of decoding the latest versions.

`compile_reader(schema)` returns `read(payload, start) -> (record, end)`: the record as its class in `records.py`,
equal to what fastavro's schemaless_reader reads (timestamps as int milliseconds) for every body that reader accepts. It raises on anything doubtful (a bad varint, length, index or boolean byte, an
out-of-range int), and the codec then asks fastavro, so errors read exactly as they always did. The same source,
with C types declared, is what `schemas/native.py` compiles with Cython.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from swarmlog.schemas import records
from swarmlog.schemas.typed import field_order, full_name

Reader = Callable[[bytes, int], tuple[Any, int]]
INT32 = 2**31
_FLOAT = struct.Struct("<f").unpack_from
_DOUBLE = struct.Struct("<d").unpack_from
PRIMITIVE_NAMES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}


class Unsupported(ValueError):
    """The schema uses something the generator does not write code for; fastavro reads it instead."""


def _long(payload: bytes, pos: int) -> tuple[int, int]:
    """A zig-zag varint at `pos`, and the position after it; ValueError past 10 bytes."""
    result = shift = 0
    while True:
        byte = payload[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _int(value: int) -> int:
    if not -INT32 <= value < INT32:
        raise ValueError(f"{value} is out of the int range")
    return value


def _length(value: int, pos: int, size: int) -> int:
    """The end of a `value`-byte run starting at `pos`; ValueError when negative or past the payload."""
    if value < 0 or pos + value > size:
        raise ValueError("bad length")
    return pos + value


def _boolean(byte: int) -> bool:
    if byte > 1:
        raise ValueError(f"boolean byte {byte}")
    return byte == 1


class CodeGenerator:
    """What generating per-schema code needs: the functions written, one per record full name, and fresh names and
    constants for them. Names it makes start with `prefix`, so the functions of several schemas can share one module.
    """

    def __init__(self, prefix: str = "") -> None:
        self.prefix = prefix
        self.functions: list[str] = []
        self.names: dict[str, str] = {}
        self.named_schemas: dict[str, Any] = {}
        self.constants: dict[str, Any] = {}
        self.counter = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{self.prefix}{prefix}{self.counter}"

    def constant(self, value: Any) -> str:
        name = self.fresh("_const")
        self.constants[name] = value
        return name

    def build(self, entry: str, helpers: Mapping[str, Any], label: str) -> Any:
        """The generated function named `entry`, its source run with the helpers and constants in scope."""
        scope: dict[str, Any] = {**helpers, **self.constants}
        exec(compile("\n\n".join(self.functions), label, "exec"), scope)
        return scope[entry]


class Generator(CodeGenerator):
    """Writes one reading function per record type; primitives and logical types are inlined into them."""

    def record(self, schema: Mapping[str, Any], namespace: str) -> str:
        """The name of the function reading this record (written once per full name)."""
        full = full_name(schema, namespace)
        if full in self.names:
            return self.names[full]
        function = self.names[full] = self.fresh("_record")
        namespace = full.rpartition(".")[0]
        lines = [f"def {function}(b, p):", "    size = len(b)"]
        for index, field in enumerate(schema["fields"]):  # fields into locals, the record built once at the end
            lines += self.value(field["type"], f"v{index}", namespace, "    ")
        position = {field["name"]: index for index, field in enumerate(schema["fields"])}
        built = ", ".join(f"v{position[field['name']]}" for field in field_order(schema))
        self.functions.append("\n".join([*lines, f"    return _records.{full.rpartition('.')[2]}({built}), p"]))
        return function

    @staticmethod
    def varint(target: str, indent: str) -> list[str]:
        """Lines reading a zig-zag varint into `target`: one byte inline, longer ones through `_long`."""
        return [
            f"{indent}{target} = b[p]",
            f"{indent}if {target} < 128:",
            f"{indent}    p += 1",
            f"{indent}    {target} = ({target} >> 1) ^ -({target} & 1)",
            f"{indent}else:",
            f"{indent}    {target}, p = _long(b, p)",
        ]

    @staticmethod
    def small(target: str, indent: str) -> list[str]:
        """Lines reading a one-byte varint's raw byte (not zig-zag decoded) into `target`; a longer one is doubted."""
        return [
            f"{indent}{target} = b[p]",
            f"{indent}p += 1",
            f"{indent}if {target} > 127:",
            f"{indent}    raise ValueError('union or enum index past one byte')",
        ]

    @staticmethod
    def run_end(indent: str) -> list[str]:
        """Lines setting `e` to the end of the byte run whose length varint is at `p`, and `p` to its start."""
        return [
            f"{indent}n = b[p]",
            f"{indent}if n < 128:",
            f"{indent}    p += 1",
            f"{indent}    if n & 1:",
            f"{indent}        raise ValueError('negative length')",
            f"{indent}    e = p + (n >> 1)",
            f"{indent}else:",
            f"{indent}    n, p = _long(b, p)",
            f"{indent}    e = _length(n, p, size)",
            f"{indent}if e > size:",
            f"{indent}    raise ValueError('length past the payload')",
        ]

    def value(self, schema: Any, target: str, namespace: str, indent: str) -> list[str]:
        """Lines that read one value of `schema` at `p` into `target` and advance `p`."""
        if isinstance(schema, list):
            return self.union(schema, target, namespace, indent)
        if isinstance(schema, str):
            if schema in PRIMITIVE_NAMES:
                return self.primitive(schema, None, target, indent)
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            return self.value(self.named_schemas[full], target, namespace, indent)
        kind = schema["type"]
        if kind in PRIMITIVE_NAMES:
            return self.primitive(kind, schema.get("logicalType"), target, indent)
        if kind == "record":
            self.named_schemas[full_name(schema, namespace)] = schema
            return [f"{indent}{target}, p = {self.record(schema, namespace)}(b, p)"]
        if kind == "enum":
            self.named_schemas[full_name(schema, namespace)] = schema
            symbols = self.constant(tuple(schema["symbols"]))
            # An even byte is index n >> 1; an odd one is negative, and a missing symbol raises IndexError.
            return [
                *self.small("n", indent),
                f"{indent}if n & 1:",
                f"{indent}    raise ValueError('negative index')",
                f"{indent}{target} = {symbols}[n >> 1]",
            ]
        if kind in ("array", "map"):
            return self.blocks(schema, target, namespace, indent)
        raise Unsupported(f"type {kind!r}")

    def primitive(self, kind: str, logical: str | None, target: str, indent: str) -> list[str]:
        if logical not in (None, "timestamp-millis") or (logical and kind != "long"):
            raise Unsupported(f"logical type {logical!r} on {kind}")
        if kind in ("bytes", "string"):
            value = "b[p:e]" if kind == "bytes" else "b[p:e].decode('utf-8')"  # Cython decodes the slice in place
            return [*self.run_end(indent), f"{indent}{target} = {value}", f"{indent}p = e"]
        then = {
            "int": [f"{target} = _int(n)"],
            # (days, seconds, microseconds, milliseconds): positional arguments cost a third less than keywords
            "long": [f"{target} = n"],  # timestamp-millis too: events keep int milliseconds
        }.get(kind)
        if then is not None:
            return [*self.varint("n", indent), *(indent + line for line in then)]
        return [
            indent + line
            for line in {
                "null": [f"{target} = None"],
                "boolean": [f"{target} = _boolean(b[p])", "p += 1"],
                "float": [f"{target}, = _float(b, p)", "p += 4"],
                "double": [f"{target}, = _double(b, p)", "p += 8"],
            }[kind]
        ]

    def union(self, branches: list[Any], target: str, namespace: str, indent: str) -> list[str]:
        lines = self.small("n", indent)
        for index, branch in enumerate(branches):  # branch i is written as the zig-zag byte 2i
            lines.append(f"{indent}{'if' if index == 0 else 'elif'} n == {2 * index}:")
            lines += self.value(branch, target, namespace, indent + "    ")
        return [*lines, f"{indent}else:", f"{indent}    raise ValueError(f'union index byte {{n}}')"]

    def blocks(self, schema: Mapping[str, Any], target: str, namespace: str, indent: str) -> list[str]:
        """An array or map: blocks of items, a negative count followed by the block's byte size, until 0."""
        items, count, inner = self.fresh("_items"), self.fresh("_count"), indent + "        "
        is_map = schema["type"] == "map"
        lines = [
            f"{indent}{items} = {{}}" if is_map else f"{indent}{items} = []",
            *self.varint(count, indent),
            f"{indent}while {count}:",
            f"{indent}    if {count} < 0:",
            f"{indent}        {count} = -{count}",
            f"{indent}        _, p = _long(b, p)",
            f"{indent}    for _ in range({count}):",
        ]
        if is_map:
            key = self.fresh("_key")
            lines += self.primitive("string", None, key, inner)
            lines += self.value(schema["values"], f"{items}[{key}]", namespace, inner)
        else:
            item = self.fresh("_item")
            lines += self.value(schema["items"], item, namespace, inner)
            lines.append(f"{inner}{items}.append({item})")
        return [*lines, *self.varint(count, indent + "    "), f"{indent}{target} = {items}"]


def compile_reader(schema: Mapping[str, Any], classes: ModuleType = records) -> Reader:
    """The generated reader of bodies written with the record `schema` (the latest version of its record in the
    module `classes`); Unsupported when it cannot make one."""
    generator = Generator()
    entry = generator.record(schema, "")
    helpers = {
        "_long": _long,
        "_int": _int,
        "_length": _length,
        "_boolean": _boolean,
        "_float": _FLOAT,
        "_double": _DOUBLE,
        "_records": classes,
    }
    reader: Reader = generator.build(entry, helpers, f"<avro reader {full_name(schema, '')}>")
    return reader
