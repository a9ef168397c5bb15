"""Optional Confluent Schema Registry wire format: `00`, a 4-byte big-endian schema id, the Avro body.

Only the framing is unit-tested (with an in-memory registry); the HTTP client has no registry server to
be integration-tested against here, so it is kept to the two documented calls it needs.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Protocol

from fastavro.schema import SchemaParseException

from swarmlog.errors import DecodeError, ServiceError
from swarmlog.schemas.catalog import SchemaVersion, fingerprint

MAGIC = b"\x00"
HEADER_SIZE = len(MAGIC) + 4
CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistry(Protocol):
    """Maps schemas to registry ids and back."""

    def register(self, subject: str, schema: str) -> int:
        """The id of `schema` (Avro JSON) under `subject`, registering it if it is new."""

    def schema(self, schema_id: int) -> str | None:
        """The Avro JSON registered under an id, or None when the registry has no such id."""


class HttpSchemaRegistry:
    """A Confluent-compatible registry over HTTP (urllib): `POST /subjects/{s}/versions`, `GET /schemas/ids/{id}`."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self._url = url.rstrip("/")
        self._timeout_s = timeout_s

    def register(self, subject: str, schema: str) -> int:
        """The id the registry gives `schema` under `subject`."""
        path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
        answer = self._call("POST", path, {"schema": schema})
        if answer is None:
            raise ServiceError(f"schema registry {self._url} has no {path}; is this a Confluent-compatible registry?")
        return int(answer["id"])

    def schema(self, schema_id: int) -> str | None:
        """The schema registered under `schema_id`, or None when the registry does not know the id."""
        answer = self._call("GET", f"/schemas/ids/{schema_id}")
        return None if answer is None else str(answer["schema"])

    def _call(self, method: str, path: str, body: dict[str, str] | None = None) -> dict[str, Any] | None:
        """The JSON answer, None on 404, ServiceError on anything else that is not a success."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        request = urllib.request.Request(self._url + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                answer: dict[str, Any] = json.load(response)
                return answer
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return None
            raise ServiceError(
                f"schema registry {self._url} answered {exc.code} to {method} {path}: {exc.read()!r}"
            ) from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise ServiceError(
                f"schema registry {self._url} did not answer {method} {path}: {exc}; "
                "check SWARMLOG_SCHEMA_REGISTRY_URL, or unset it to use single-object encoding"
            ) from exc


class ConfluentFraming:
    """Frames bodies the Confluent way; ids come from a registry (subject = the record's full name)."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self._registry = registry
        self._headers: dict[bytes, bytes] = {}
        self._fingerprints: dict[int, bytes] = {}

    def header(self, version: SchemaVersion) -> bytes:
        """`00` and the registry id of `version` (registered on first use)."""
        header = self._headers.get(version.fingerprint)
        if header is None:
            schema_id = self._registry.register(version.full_name, json.dumps(version.schema))
            header = self._headers[version.fingerprint] = MAGIC + schema_id.to_bytes(4, "big")
        return header

    def split(self, payload: bytes) -> tuple[bytes, int]:
        """The fingerprint of the schema the header's id names, and 5."""
        if len(payload) < HEADER_SIZE:
            what = "empty payload" if not payload else f"{len(payload)} bytes"
            raise DecodeError(f"{what}: too short for a Confluent header (00 + 4-byte schema id)")
        if payload[:1] != MAGIC:
            raise DecodeError(f"wrong magic {payload[:1].hex()}: not the Confluent wire format (00)")
        schema_id = int.from_bytes(payload[1:HEADER_SIZE], "big")
        fp = self._fingerprints.get(schema_id)
        if fp is None:
            schema = self._registry.schema(schema_id)
            if schema is None:
                raise DecodeError(f"schema id {schema_id} is not in the schema registry")
            try:
                fp = self._fingerprints[schema_id] = fingerprint(schema)
            except (ValueError, SchemaParseException) as exc:
                raise DecodeError(f"schema id {schema_id} is not an Avro schema: {exc}") from None
        return fp, HEADER_SIZE
