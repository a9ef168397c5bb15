"""Avro binary bodies written by Python source generated once per schema: the fast path of encoding events.

`compile_writer(schema)` returns `write(event, out)`, which appends to the bytearray `out` the body fastavro's
schemaless_writer writes for the event's builtins. It writes only values that have exactly the Python type their
schema maps to (str, int, float, bool, bytes, None, list or tuple, dict, the record's class) and that are in range; on
anything else it raises, and the codec validates and writes with fastavro instead, so a bad event's error reads
exactly as it always did. Unions whose branches one Python type could match twice are not generated (Unsupported).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any

from swarmlog.schemas import records
from swarmlog.schemas.compiled import PRIMITIVE_NAMES, CodeGenerator, Unsupported
from swarmlog.schemas.typed import full_name

Writer = Callable[[Any, bytearray], None]
INT32 = 2**31
INT64 = 2**63
_FLOAT = struct.Struct("<f").pack
_DOUBLE = struct.Struct("<d").pack
SEQUENCE_TYPES = (list, tuple)
# The Python type test of each kind. In a union fastavro writes the first branch whose validation accepts the value,
# so a union is generated only where no two branches accept the same values: a record branch stands for what
# validation accepts as one (a dict), and numbers and booleans, which validate across kinds, never share a union.
NUMERIC = {"boolean", "int", "long", "float", "double"}
TESTS = {
    "null": "{v} is None",
    "boolean": "type({v}) is bool",
    "int": "type({v}) is int",
    "long": "type({v}) is int",
    "float": "type({v}) is float",
    "double": "type({v}) is float",
    "bytes": "type({v}) is bytes",
    "string": "type({v}) is str",
    "enum": "type({v}) is str",
    "array": "type({v}) in _sequences",
    "map": "type({v}) is dict",
    "record": "type({v}) is dict",
}


class UnexpectedValue(TypeError):
    """A value the generated writer does not write: the codec hands the event to fastavro's validation."""


def _long(out: bytearray, value: int) -> None:
    """Append the zig-zag varint of a long."""
    value = (value << 1) ^ (value >> 63)
    while value > 127:
        out.append((value & 127) | 128)
        value >>= 7
    out.append(value)


def _doubt(value: Any) -> None:
    raise UnexpectedValue(f"{type(value).__name__} {value!r:.40}")


class Generator(CodeGenerator):
    """Writes one writing function per record type; primitives are inlined into them."""

    def __init__(self, classes: ModuleType) -> None:
        super().__init__()
        self.classes = classes

    def record(self, schema: Mapping[str, Any], namespace: str) -> str:
        """The name of the function writing this record (written once per full name)."""
        full = full_name(schema, namespace)
        if full in self.names:
            return self.names[full]
        self.named_schemas[full] = schema
        function = self.names[full] = self.fresh("_record")
        namespace = full.rpartition(".")[0]
        lines = [f"def {function}(o, out):"]
        for field in schema["fields"]:
            value = self.fresh("v")
            lines += [f"    {value} = o.{field['name']}", *self.value(field["type"], value, namespace, "    ")]
        self.functions.append("\n".join(lines))
        return function

    def resolve(self, schema: Any, namespace: str) -> tuple[str, Any]:
        """The kind of a schema ("string", "record", "union", ...) and its definition, named types looked up."""
        if isinstance(schema, list):
            return "union", schema
        if isinstance(schema, str):
            if schema in PRIMITIVE_NAMES:
                return schema, {"type": schema}
            full = schema if "." in schema or not namespace else f"{namespace}.{schema}"
            return self.resolve(self.named_schemas[full], namespace)
        kind = schema["type"]
        if kind in ("record", "enum"):
            self.named_schemas[full_name(schema, namespace)] = schema
        return kind, schema

    def test(self, kind: str, definition: Any, v: str, namespace: str) -> str:
        """The expression true when the value in `v` has the Python type of its schema."""
        if kind == "record":
            return f"type({v}) is {self.class_of(definition, namespace)}"
        return TESTS[kind].format(v=v)

    def class_of(self, definition: Mapping[str, Any], namespace: str) -> str:
        """The constant naming a record's class in `classes`."""
        return self.constant(getattr(self.classes, full_name(definition, namespace).rpartition(".")[2]))

    def value(self, schema: Any, v: str, namespace: str, indent: str) -> list[str]:
        """Lines that check the value in the local `v` and append its body to `out`."""
        kind, definition = self.resolve(schema, namespace)
        if kind == "union":
            return self.union(definition, v, namespace, indent)
        if kind in PRIMITIVE_NAMES:
            return self.primitive(kind, definition.get("logicalType"), v, indent)
        doubt = [f"{indent}if not ({self.test(kind, definition, v, namespace)}):", f"{indent}    _doubt({v})"]
        if kind == "record":
            return [*doubt, f"{indent}{self.record(definition, namespace)}({v}, out)"]
        if kind == "enum":
            if len(definition["symbols"]) > 64:
                raise Unsupported("an enum of more than 64 symbols")
            indexes = self.constant({symbol: bytes([2 * i]) for i, symbol in enumerate(definition["symbols"])})
            return [f"{indent}if type({v}) is not str or {v} not in {indexes}:", f"{indent}    _doubt({v})",
                    f"{indent}out += {indexes}[{v}]"]  # fmt: skip
        if kind in ("array", "map"):
            return [*doubt, *self.blocks(definition, v, namespace, indent)]
        raise Unsupported(f"type {kind!r}")

    def primitive(self, kind: str, logical: str | None, v: str, indent: str) -> list[str]:
        if logical not in (None, "timestamp-millis") or (logical and kind != "long"):
            raise Unsupported(f"logical type {logical!r} on {kind}")
        doubt = [f"{indent}if not ({TESTS[kind].format(v=v)}):", f"{indent}    _doubt({v})"]
        if kind == "null":
            return doubt
        if kind == "boolean":
            return [*doubt, f"{indent}out.append(1 if {v} else 0)"]
        if kind in ("int", "long"):
            bound = "_int32" if kind == "int" else "_int64"
            return [f"{indent}if type({v}) is not int or not -{bound} <= {v} < {bound}:", f"{indent}    _doubt({v})",
                    f"{indent}if 0 <= {v} < 64:", f"{indent}    out.append({v} << 1)",
                    f"{indent}else:", f"{indent}    _long(out, {v})"]  # fmt: skip
        if kind in ("float", "double"):
            return [*doubt, f"{indent}out += {'_float' if kind == 'float' else '_double'}({v})"]
        data = f"{v}.encode()" if kind == "string" else v
        return [*doubt, f"{indent}s = {data}", f"{indent}n = len(s)",
                f"{indent}if n < 64:", f"{indent}    out.append(n << 1)", f"{indent}else:", f"{indent}    _long(out, n)",
                f"{indent}out += s"]  # fmt: skip

    def union(self, branches: list[Any], v: str, namespace: str, indent: str) -> list[str]:
        """Lines writing the branch index and the value of the one branch whose Python type the value has."""
        resolved = [self.resolve(branch, namespace) for branch in branches]
        kinds = [kind for kind, _ in resolved]
        validated = [TESTS.get(kind) for kind in kinds]  # what fastavro's validation accepts, by kind
        if None in validated or len(set(validated)) < len(validated) or len(NUMERIC & set(kinds)) > 1:
            raise Unsupported(f"a union where fastavro could pick another branch than its value's type: {kinds}")
        lines = []
        for index, (kind, definition) in enumerate(resolved):
            lines.append(f"{indent}{'if' if index == 0 else 'elif'} {self.test(kind, definition, v, namespace)}:")
            lines.append(f"{indent}    out.append({2 * index})")
            lines += self.value(branches[index], v, namespace, indent + "    ")
        return [*lines, f"{indent}else:", f"{indent}    _doubt({v})"]

    def blocks(self, schema: Mapping[str, Any], v: str, namespace: str, indent: str) -> list[str]:
        """An array or map: its count, then its items, then 0 (only 0 when empty)."""
        item, inner = self.fresh("_item"), indent + "        "
        lines = [f"{indent}if {v}:", f"{indent}    _long(out, len({v}))"]
        if schema["type"] == "map":
            key = self.fresh("_key")
            lines.append(f"{indent}    for {key}, {item} in {v}.items():")
            lines += self.primitive("string", None, key, inner)
            lines += self.value(schema["values"], item, namespace, inner)
        else:
            lines.append(f"{indent}    for {item} in {v}:")
            lines += self.value(schema["items"], item, namespace, inner)
        return [*lines, f"{indent}out.append(0)"]


def compile_writer(schema: Mapping[str, Any], classes: ModuleType = records) -> Writer:
    """The generated writer of events of the record `schema` (the latest version of its record, whose classes are in
    the module `classes`); Unsupported when it cannot make one."""
    generator = Generator(classes)
    entry = generator.record(schema, "")
    helpers = {
        "_long": _long,
        "_doubt": _doubt,
        "_float": _FLOAT,
        "_double": _DOUBLE,
        "_int32": INT32,
        "_int64": INT64,
        "_sequences": SEQUENCE_TYPES,
    }
    writer: Writer = generator.build(entry, helpers, f"<avro writer {full_name(schema, '')}>")
    return writer
