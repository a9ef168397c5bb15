"""History files: records with their coordinates and raw bytes, gzip'd, replayed offline by the same folds.

Line 1 is the header (format, version, what was selected, the schemas used by fingerprint, the topics). Version 2
follows it with one binary frame per record: topic index, partition, offset, timestamp, key and value sizes (-1 for
none), then the key and value bytes as the log held them. Version 1 (still read) has one JSON line per record with
key and value in base64, five times slower to load. Undecodable records are kept as they are.
"""

from __future__ import annotations

import base64
import dataclasses
import gzip
import json
import struct
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from swarmlog.replay.fold import Record
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import HEADER_SIZE, MAGIC

FORMAT = "swarmlog-history"
VERSION = 2
READABLE = (1, 2)
FRAME = struct.Struct("<Hiqqii")


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
    topics = sorted({record.topic for record in records})
    index = {topic: number for number, topic in enumerate(topics)}
    header = {"format": FORMAT, "version": VERSION, "regions": list(regions), "selection": dict(selection),
              "schemas": fingerprints(records), "records": len(records), "topics": topics}
    with gzip.GzipFile(path, "wb", mtime=0) as out:
        out.write(json.dumps(header, sort_keys=True).encode() + b"\n")
        for record in records:
            out.write(FRAME.pack(index[record.topic], record.partition, record.offset, record.timestamp,
                                 _size(record.key), _size(record.value)) + (record.key or b"") + (record.value or b""))
    return len(records)


def load(path: Path) -> History:
    """The history in a file written by `export` (this version or an older one); ValueError when it is not one."""
    with gzip.open(path, "rb") as raw:
        blob = raw.read()
    end = blob.find(b"\n")
    header = json.loads(blob[:end] if end >= 0 else b"{}")
    if header.get("format") != FORMAT or header.get("version") not in READABLE:
        raise ValueError(f"{path} is not a {FORMAT} v{VERSION} file (header {header!r:.120})")
    if header["version"] == 1:
        return History(header, tuple(_record(json.loads(line)) for line in blob[end + 1:].splitlines()))
    return History(header, tuple(_frames(blob, end + 1, header["topics"])))


def _frames(blob: bytes, pos: int, topics: list[str]) -> Iterator[Record]:
    unpack, size = FRAME.unpack_from, FRAME.size
    while pos < len(blob):
        topic, partition, offset, timestamp, key_size, value_size = unpack(blob, pos)
        pos += size
        key, pos = _take(blob, pos, key_size)
        value, pos = _take(blob, pos, value_size)
        yield Record(topics[topic], partition, offset, timestamp, key, value)


def _take(blob: bytes, pos: int, size: int) -> tuple[bytes | None, int]:
    if size < 0:
        return None, pos
    if pos + size > len(blob):
        raise ValueError(f"history file truncated: a record needs {size} bytes at {pos}, {len(blob) - pos} are left")
    return blob[pos:pos + size], pos + size


def _size(raw: bytes | None) -> int:
    return -1 if raw is None else len(raw)


def _record(line: Mapping[str, Any]) -> Record:
    return Record(line["topic"], line["partition"], line["offset"], line["timestamp"], _bytes(line["key"]),
                  _bytes(line["value"]))


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
