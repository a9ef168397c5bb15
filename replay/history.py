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
import zlib
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from swarmlog.collector import collector_paused
from swarmlog.replay.fold import Record
from swarmlog.schemas.catalog import default_catalog
from swarmlog.schemas.codec import HEADER_SIZE, MAGIC

FORMAT = "swarmlog-history"
VERSION = 2
READABLE = (1, 2)
FRAME = struct.Struct("<Hiqqii")
COMPRESSION = 6  # zlib's default: a fifth of level 9's time (gzip's default) for 2 % more bytes
WRITE_CHUNK = 10_000  # frames joined per write


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
    used = {
        record.value[2:HEADER_SIZE]
        for record in records
        if record.value and record.value[:2] == MAGIC and len(record.value) >= HEADER_SIZE
    }
    return {fp.hex(): labels.get(fp, "unknown") for fp in sorted(used)}


def export(path: Path, records: Iterable[Record], regions: tuple[str, ...], selection: Mapping[str, Any]) -> int:
    """Write `records` to a history file at `path`; returns how many."""
    records = tuple(records)
    topics = sorted({record.topic for record in records})
    index = {topic: number for number, topic in enumerate(topics)}
    header = {
        "format": FORMAT,
        "version": VERSION,
        "regions": list(regions),
        "selection": dict(selection),
        "schemas": fingerprints(records),
        "records": len(records),
        "topics": topics,
    }
    with gzip.GzipFile(path, "wb", compresslevel=COMPRESSION, mtime=0) as out:
        out.write(json.dumps(header, sort_keys=True).encode() + b"\n")
        for first in range(0, len(records), WRITE_CHUNK):
            out.write(
                b"".join(
                    FRAME.pack(
                        index[record.topic],
                        record.partition,
                        record.offset,
                        record.timestamp,
                        _size(record.key),
                        _size(record.value),
                    )
                    + (record.key or b"")
                    + (record.value or b"")
                    for record in records[first : first + WRITE_CHUNK]
                )
            )
    return len(records)


def load(path: Path, topics: Collection[str] | None = None) -> History:
    """The history in a file written by `export` (this version or an older one), only `topics`' records if given;
    ValueError saying what is wrong when it is not one (not gzip, cut short, a bad header or frame)."""
    try:
        with gzip.open(path, "rb") as raw:
            blob = raw.read()
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError; a cut stream ends in EOFError
        raise ValueError(f"{path} is not a readable {FORMAT} file: {type(exc).__name__}: {exc}") from None
    end = blob.find(b"\n")
    try:
        header = json.loads(blob[:end] if end >= 0 else b"{}")
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT or header.get("version") not in READABLE:
        raise ValueError(f"{path} is not a {FORMAT} v{VERSION} file (header {blob[: max(end, 0)][:120]!r})")
    with collector_paused():  # a million new records, none in a cycle
        try:
            if header["version"] == 1:
                records = (_record(json.loads(line)) for line in blob[end + 1 :].splitlines())
                return History(header, tuple(r for r in records if topics is None or r.topic in topics))
            return History(header, tuple(_frames(blob, end + 1, header["topics"], topics)))
        except (KeyError, TypeError) as exc:  # a version 1 line or the header without its fields
            raise ValueError(f"{path}: a malformed record or header: {type(exc).__name__}: {exc}") from None


def _frames(blob: bytes, pos: int, names: list[str], topics: Collection[str] | None) -> Iterator[Record]:
    """The records of the binary frames from `pos` on; frames of other topics are only stepped over."""
    wanted = [topics is None or name in topics for name in names]
    unpack, size, end = FRAME.unpack_from, FRAME.size, len(blob)
    while pos < end:
        if pos + size > end:
            raise ValueError(
                f"history file truncated: a frame header at byte {pos} needs {pos + size - end} more bytes"
            )
        topic, partition, offset, timestamp, key_size, value_size = unpack(blob, pos)
        if topic >= len(names):
            raise ValueError(
                f"history file corrupt: the frame at byte {pos} names topic #{topic}; the header lists {len(names)}"
            )
        start = pos + size
        pos = start + max(key_size, 0) + max(value_size, 0)
        if pos > end:
            raise ValueError(
                f"history file truncated: the record at offset {offset} of {names[topic]} needs {pos - end} more bytes"
            )
        if wanted[topic]:
            split = start + max(key_size, 0)
            key = None if key_size < 0 else blob[start:split]
            value = None if value_size < 0 else blob[split:pos]
            yield Record(names[topic], partition, offset, timestamp, key, value)


def _size(raw: bytes | None) -> int:
    return -1 if raw is None else len(raw)


def _record(line: Mapping[str, Any]) -> Record:
    return Record(
        line["topic"], line["partition"], line["offset"], line["timestamp"], _bytes(line["key"]), _bytes(line["value"])
    )


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)
