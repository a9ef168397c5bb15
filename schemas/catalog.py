"""Every kept version of every event schema, found by record name or by CRC-64-AVRO fingerprint."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import to_parsing_canonical_form
from fastavro.types import Schema

from swarmlog.errors import SchemaCompatibilityError

PACKAGE_DIR = Path(__file__).resolve().parent
AVRO_DIR = PACKAGE_DIR / "avro"
_VERSION_FILE = re.compile(r"v([1-9][0-9]*)\.avsc")

# CRC-64-AVRO (the Rabin fingerprint of the Avro specification): EMPTY is both the seed and the polynomial.
CRC64_EMPTY = 0xC15D213AA4D7A795
_CRC64_TABLE = tuple(
    functools.reduce(lambda fp, _: (fp >> 1) ^ (CRC64_EMPTY & -(fp & 1)), range(8), i) for i in range(256)
)


def crc64_avro(data: bytes) -> int:
    """The CRC-64-AVRO fingerprint of some bytes, as the specification's 64-bit number."""
    fp = CRC64_EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _CRC64_TABLE[(fp ^ byte) & 0xFF]
    return fp


def fingerprint(schema: dict[str, Any] | str) -> bytes:
    """The 8 little-endian bytes of the CRC-64-AVRO of a schema's Parsing Canonical Form (as on the wire)."""
    canonical = to_parsing_canonical_form(json.loads(schema) if isinstance(schema, str) else schema)
    return crc64_avro(canonical.encode()).to_bytes(8, "little")


@dataclasses.dataclass(frozen=True, slots=True, eq=False)
class SchemaVersion:
    """One `<name>/v<version>.avsc`: its JSON, its fastavro-parsed form and its fingerprint."""

    name: str
    version: int
    schema: dict[str, Any]
    parsed: Schema
    """The schema as fastavro parses it (what its readers and writers take)."""
    fingerprint: bytes
    path: Path

    @property
    def full_name(self) -> str:
        """The record's Avro full name as the file declares it."""
        return fastavro.schema.fullname(self.schema)

    @property
    def label(self) -> str:
        """`Name vN`, as the lock file and problem reports write it."""
        return f"{self.name} v{self.version}"

    @classmethod
    def load(cls, path: Path) -> SchemaVersion:
        """The version stored at `<dir>/<Name>/vN.avsc`, or a SchemaCompatibilityError saying what is wrong."""
        match = _VERSION_FILE.fullmatch(path.name)
        if match is None:
            raise SchemaCompatibilityError(f"{path}: schema files must be named v1.avsc, v2.avsc, ...")
        try:
            schema = json.loads(path.read_text(encoding="utf-8"))
            parsed = fastavro.parse_schema(schema)
        except (ValueError, fastavro.schema.SchemaParseException) as exc:
            raise SchemaCompatibilityError(f"{path}: not a valid Avro schema: {exc}") from exc
        if not isinstance(schema, dict) or schema.get("type") != "record":
            raise SchemaCompatibilityError(f"{path}: an event schema must be an Avro record")
        return cls(path.parent.name, int(match[1]), schema, parsed, fingerprint(schema), path)


class SchemaCatalog:
    """All versions of all event schemas; the highest version of a name is its reader (and writer) schema."""

    def __init__(self, versions: Iterable[SchemaVersion]) -> None:
        by_name: dict[str, list[SchemaVersion]] = {}
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        for version in versions:
            clash = self._by_fingerprint.setdefault(version.fingerprint, version)
            if clash is not version:
                raise SchemaCompatibilityError(
                    f"{version.label} and {clash.label} have the same fingerprint {version.fingerprint.hex()}: "
                    "a new version must change what is written, or it is not a new version"
                )
            by_name.setdefault(version.name, []).append(version)
        self._by_name = {name: tuple(sorted(vs, key=lambda v: v.version)) for name, vs in sorted(by_name.items())}

    @classmethod
    def from_directory(cls, root: Path) -> SchemaCatalog:
        """The catalog of `root/<Name>/vN.avsc` files."""
        return cls(SchemaVersion.load(path) for path in sorted(root.glob("*/v*.avsc")))

    def names(self) -> tuple[str, ...]:
        """Every record name, sorted."""
        return tuple(self._by_name)

    def versions(self, name: str) -> tuple[SchemaVersion, ...]:
        """Every kept version of a record, oldest first."""
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no schema for event {name!r}; add schemas/avro/{name}/v1.avsc") from None

    def latest(self, name: str) -> SchemaVersion:
        """The highest version of a record: what is written, and what every older version is read into."""
        return self.versions(name)[-1]

    def by_fingerprint(self, fp: bytes) -> SchemaVersion | None:
        """The version whose canonical fingerprint (8 wire bytes) this is, if it is kept."""
        return self._by_fingerprint.get(fp)

    def __iter__(self) -> Iterator[SchemaVersion]:
        """Every version of every record."""
        return iter(self._by_fingerprint.values())


@functools.lru_cache(maxsize=1)
def default_catalog() -> SchemaCatalog:
    """The catalog shipped in this package (loaded once)."""
    return SchemaCatalog.from_directory(AVRO_DIR)
