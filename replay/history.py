"""History files: records with their coordinates and raw bytes, gzip'd JSON lines, replayed offline by the same folds.

Line 1 is the header (format, version, what was selected, the schemas used by fingerprint); each further line is a
record: topic, partition, offset, timestamp, and key and value in base64. Undecodable records are kept as they are.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import io
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from swarmlog.replay.fold import Record
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import HEADER_SIZE, MAGIC

FORMAT = "swarmlog-history"
VERSION = 1


@dataclasses.dataclass(frozen=True, slots=True)
class History:
    """A history file's contents: its header and its records."""

    header: Mapping[str, Any]
    records: tuple[Record, ...]

    @property
    def regions(self) -> tuple[str, ...]:
        """The regions of the run it was exported from (region i owns journal partition i)."""
        return tuple(self.header["regions"])


def fingerprints(records: Iterable[Record]) -> dict[str, str]:
    """Fingerprint (hex) → schema label (e.g. TaskAssigned v1) of every single-object record among `records`."""
    labels = {version.fingerprint: version.label for version in default_catalog()}
    used = {record.value[2:HEADER_SIZE] for record in records
            if record.value and record.value[:2] == MAGIC and len(record.value) >= HEADER_SIZE}
    return {fp.hex(): labels.get(fp, "unknown") for fp in sorted(used)}


def export(path: Path, records: Iterable[Record], regions: tuple[str, ...], selection: Mapping[str, Any]) -> int:
    """Write `records` to a history file at `path`; returns how many."""
    records = tuple(records)
    header = {"format": FORMAT, "version": VERSION, "regions": list(regions), "selection": dict(selection),
              "schemas": fingerprints(records), "records": len(records)}
    with gzip.GzipFile(path, "wb", mtime=0) as raw, io.TextIOWrapper(raw, encoding="utf-8") as out:
        out.write(json.dumps(header, sort_keys=True) + "\n")
        for record in records:
            out.write(json.dumps({"topic": record.topic, "partition": record.partition, "offset": record.offset,
                                  "timestamp": record.timestamp, "key": _b64(record.key),
                                  "value": _b64(record.value)}, sort_keys=True) + "\n")
    return len(records)


def load(path: Path) -> History:
    """The history in a file written by `export`; ValueError when it is not one."""
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        header = json.loads(next(lines, "{}"))
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise ValueError(f"{path} is not a {FORMAT} v{VERSION} file (header {header!r:.120})")
        records = tuple(_record(json.loads(line)) for line in lines)
    return History(header, records)


def _record(line: Mapping[str, Any]) -> Record:
    return Record(line["topic"], line["partition"], line["offset"], line["timestamp"], _bytes(line["key"]),
                  _bytes(line["value"]))


def _b64(raw: bytes | None) -> str | None:
    return None if raw is None else base64.b64encode(raw).decode("ascii")


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
