"""Schema evolution: the CI gate catches incompatible or edited versions, and old events read into new schemas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from swarmlog.errors import DecodeError
from swarmlog.schemas.catalog import AVRO_DIR, SchemaCatalog, default_catalog
from swarmlog.schemas.codec import Codec
from swarmlog.schemas.compat import LOCK_NAME, check_schemas
from swarmlog.schemas.typed import classes_of

NAME = "TaskStarted"


def v1() -> dict[str, Any]:
    """A fresh copy of the shipped TaskStarted v1 schema."""
    return json.loads((AVRO_DIR / NAME / "v1.avsc").read_text())


def write_version(root: Path, schema: dict[str, Any], version: int, name: str = NAME) -> None:
    """Store a schema as root/avro/<name>/v<version>.avsc."""
    folder = root / "avro" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"v{version}.avsc").write_text(json.dumps(schema, indent=2))


def with_field(field: dict[str, Any]) -> dict[str, Any]:
    """TaskStarted v1 with one more field."""
    schema = v1()
    schema["fields"].append(field)
    return schema


@pytest.fixture
def published(tmp_path: Path) -> Path:
    """A catalog folder holding TaskStarted v1, published in its lock."""
    write_version(tmp_path, v1(), 1)
    assert check_schemas(tmp_path, update_lock=True) == []
    return tmp_path


def test_the_shipped_catalog_passes_and_matches_its_lock() -> None:
    assert check_schemas() == []


def test_the_lock_lists_every_shipped_version() -> None:
    lock = (AVRO_DIR.parent / LOCK_NAME).read_text()
    assert all(f"{version.label} {version.fingerprint.hex()}\n" in lock for version in default_catalog())


def test_a_field_added_with_a_default_is_compatible_and_gets_published(published: Path) -> None:
    write_version(published, with_field({"name": "gpu_model", "type": "string", "default": "unknown"}), 2)
    assert check_schemas(published) == [
        f"{NAME} v2 is not in {LOCK_NAME}; publish it with `python -m swarmlog.schemas.compat --update-lock`"
    ]
    assert check_schemas(published, update_lock=True) == []
    assert check_schemas(published) == []
    assert (published / LOCK_NAME).read_text().splitlines()[-1].startswith(f"{NAME} v2 ")


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda s: s["fields"].append({"name": "gpu_model", "type": "string"}), "v2 cannot read TaskStarted v1"),
        (lambda s: s["fields"].__setitem__(9, {"name": "agent_id", "type": "int"}), "not backward compatible"),
        (lambda s: s["fields"].pop(9), "v1 cannot read TaskStarted v2 (not forward compatible)"),
        (lambda s: s.__setitem__("namespace", "swarmlog.v2"), "full name is swarmlog.v2.TaskStarted"),
    ],
    ids=["field without default", "changed type", "removed required field", "renamed"],
)
def test_an_incompatible_v2_is_reported(published: Path, change: Any, expected: str) -> None:
    schema = v1()
    change(schema)
    write_version(published, schema, 2)
    problems = check_schemas(published, update_lock=True)
    assert any(expected in problem for problem in problems), problems
    assert "v2" not in (published / LOCK_NAME).read_text()


def test_every_version_must_read_every_older_one_not_just_the_one_before(published: Path) -> None:
    write_version(published, with_field({"name": "gpu_model", "type": "string", "default": "unknown"}), 2)
    v3 = with_field({"name": "gpu_model", "type": "string"})
    v3["fields"].append({"name": "node", "type": "string", "default": ""})
    write_version(published, v3, 3)
    problems = check_schemas(published)
    assert any(f"{NAME} v3 cannot read {NAME} v1 (not backward compatible)" in problem for problem in problems)
    assert not any(f"v3 cannot read {NAME} v2" in problem for problem in problems)


def test_editing_a_published_version_is_reported(published: Path) -> None:
    write_version(published, with_field({"name": "gpu_model", "type": "string", "default": "unknown"}), 1)
    problems = check_schemas(published, update_lock=True)
    assert any("TaskStarted v1 was edited after it was published" in p and "add v2 instead" in p for p in problems)


def test_a_version_that_writes_the_same_bytes_is_not_a_new_version(published: Path) -> None:
    write_version(published, v1() | {"doc": "Reworded."}, 2)
    assert "TaskStarted v2 and TaskStarted v1 have the same fingerprint" in check_schemas(published)[0]


def test_documentation_edits_are_not_schema_edits(published: Path) -> None:
    schema = v1()
    schema["doc"] = "Reworded."
    write_version(published, schema, 1)
    assert check_schemas(published) == []


def test_deleting_a_published_version_is_reported(published: Path) -> None:
    (published / "avro" / NAME / "v1.avsc").unlink()
    assert check_schemas(published) == [
        f"{NAME} v1 is published but its file is gone; every version is kept forever, restore it"
    ]


def test_a_version_gap_is_reported(published: Path) -> None:
    write_version(published, with_field({"name": "gpu_model", "type": "string", "default": "unknown"}), 3)
    assert any("must be v1, v2, ... without gaps" in problem for problem in check_schemas(published))


def test_an_unparsable_schema_is_reported(published: Path) -> None:
    (published / "avro" / NAME / "v2.avsc").write_text("{not json")
    assert "v2.avsc: not a valid Avro schema" in check_schemas(published)[0]


def test_the_module_cli_exits_non_zero_on_problems(published: Path) -> None:
    command = [sys.executable, "-m", "swarmlog.schemas.compat", "--root", str(published)]
    assert subprocess.run(command, capture_output=True).returncode == 0
    write_version(published, with_field({"name": "gpu_model", "type": "string"}), 2)
    failed = subprocess.run(command, capture_output=True, text=True)
    assert failed.returncode == 1 and "not backward compatible" in failed.stderr


# --- reading old events into new schemas ------------------------------------------------------------------


ENVELOPE = {
    "event_id": "e-1",
    "occurred_at": 1_714_521_600_000,
    "correlation_id": "m-1",
    "causation_id": None,
    "producer": "agent:a-1",
}


STARTED = ENVELOPE | {"mission_id": "m-1", "task_id": "t-1", "replica": 0, "attempt": 1, "agent_id": "a-1"}
"""A TaskStarted as v1 knows it."""


def test_an_event_written_with_v1_reads_into_v2_with_the_default(published: Path) -> None:
    v1_catalog = SchemaCatalog.from_directory(published / "avro")
    old = Codec(v1_catalog)
    write_version(published, with_field({"name": "gpu_model", "type": "string", "default": "unknown"}), 2)
    catalog = SchemaCatalog.from_directory(published / "avro")
    new = Codec(catalog)
    v2_class = classes_of(catalog).CLASSES[NAME]
    assert new.decode(old.encode(classes_of(v1_catalog).CLASSES[NAME](**STARTED))) == v2_class(
        **STARTED, gpu_model="unknown"
    )
    written = new.encode(v2_class(**STARTED, gpu_model="H200"))
    assert written[2:10] == catalog.latest(NAME).fingerprint
    with pytest.raises(DecodeError, match=r"unknown schema fingerprint .*upgrade swarmlog"):
        old.decode(written)


def test_a_new_field_in_a_nested_record_reads_with_its_default(tmp_path: Path) -> None:
    schema = json.loads((AVRO_DIR / "MissionSubmitted" / "v1.avsc").read_text())
    write_version(tmp_path, schema, 1, "MissionSubmitted")
    old_catalog = SchemaCatalog.from_directory(tmp_path / "avro")
    old = Codec(old_catalog)
    task_spec = next(field for field in schema["fields"] if field["name"] == "tasks")["type"]["items"]
    task_spec["fields"].append({"name": "timeout_ms", "type": "long", "default": 60000})
    write_version(tmp_path, schema, 2, "MissionSubmitted")
    assert check_schemas(tmp_path, update_lock=True) == []
    task = {"task_id": "a", "prompt": "p", "required_capabilities": [], "depends_on": [], "replicas": 1, "max_steps": 4}
    mission = classes_of(old_catalog).from_fields(
        "MissionSubmitted", ENVELOPE | {"mission_id": "m-1", "title": "t", "tasks": [task]}
    )
    decoded = Codec(SchemaCatalog.from_directory(tmp_path / "avro")).decode(old.encode(mission))
    assert [msgspec.structs.asdict(spec) for spec in decoded.tasks] == [task | {"timeout_ms": 60000}]
