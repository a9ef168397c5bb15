"""Artifacts by reference: the reference's wire form, the inline-or-reference rule, the blob directory store, and how
users are shown them (watch, demo, the console)."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from swarmlog.artifacts import ArtifactCorrupt, ArtifactMissing, BlobDirectory, open_store, shown
from swarmlog.console.access import ConsoleSettings
from swarmlog.console.app import application
from swarmlog.console.feed import Feed
from swarmlog.errors import ConfigError
from swarmlog.replay.artifacts import beside, checked, referenced
from swarmlog.replay.fold import Record
from swarmlog.schemas.artifacts import ArtifactRef, externalized, inlined, parse, references
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.records import Candidate, TaskCompleted, VoteRequested
from swarmlog.settings import Settings
from swarmlog.topics import TASK_EVENTS

LIMIT = 1000


def completed(output: str) -> TaskCompleted:
    return TaskCompleted(
        event_id="e1", occurred_at=1, producer="agent:a", mission_id="m", task_id="t", replica=0, attempt=1,
        agent_id="a", output=output, steps=1, latency_ms=5,
    )  # fmt: skip


def test_a_reference_reads_back_as_written_and_nothing_else_is_one():
    ref = ArtifactRef.of(b"hello")
    assert str(ref) == f"artifact:sha256:{hashlib.sha256(b'hello').hexdigest()}:5"
    assert parse(str(ref)) == ref
    assert parse("hello") is None
    assert parse(str(ref) + " ") is None
    assert parse(str(ref).upper()) is None


def test_a_text_up_to_the_limit_stays_in_the_event_and_a_larger_one_becomes_a_reference():
    small = completed("x" * LIMIT)
    assert externalized(small, LIMIT) == (small, {})
    assert not inlined("é" * (LIMIT // 2 + 1), LIMIT)  # bytes count, not characters
    big = "y" * (LIMIT + 1)
    event, artifacts = externalized(completed(big), LIMIT)
    (ref,) = artifacts
    assert event.output == str(ref) and artifacts[ref] == big.encode() and event.task_id == "t"


def test_references_are_found_anywhere_in_an_event():
    ref = ArtifactRef.of(b"big")
    candidates = [Candidate("c0", "a", "small"), Candidate("c1", "b", str(ref))]
    ballot = VoteRequested(
        event_id="e", occurred_at=1, producer="c", mission_id="m", ballot_id="b", voter_agent_id="a", slot=1,
        candidates=candidates, deadline_at=2,
    )  # fmt: skip
    assert list(references(ballot)) == [ref]
    assert list(references(completed("plain"))) == []


def test_the_store_reads_back_what_it_stored_and_stores_the_same_bytes_once(tmp_path):
    store = BlobDirectory(tmp_path / "blobs")
    data = b"\x00\x01" * 3_000_000
    ref = store.put(data)
    assert ref == ArtifactRef.of(data) and store.get(ref) == data
    written = store.path(ref).stat().st_mtime_ns
    assert store.put(data) == ref and store.path(ref).stat().st_mtime_ns == written
    assert [path.name for path in store.path(ref).parent.iterdir()] == [ref.sha256]  # no temporary file left


def test_a_missing_or_corrupt_artifact_is_a_typed_error(tmp_path):
    store = BlobDirectory(tmp_path)
    ref = store.put(b"the artifact")
    with pytest.raises(ArtifactMissing, match="is not in"):
        store.get(ArtifactRef.of(b"never stored"))
    store.path(ref).write_bytes(b"the artifacT")
    with pytest.raises(ArtifactCorrupt, match="corrupt"):
        store.get(ref)
    store.path(ref).write_bytes(b"short")
    with pytest.raises(ArtifactCorrupt, match="corrupt"):
        store.get(ref)


def test_the_store_and_the_inline_limit_come_from_the_settings(tmp_path):
    assert open_store(Settings(cache_dir=tmp_path)).root == tmp_path / "artifacts"
    assert open_store(Settings(artifacts_dir=tmp_path / "shared")).root == tmp_path / "shared"
    assert Settings.from_env({"SWARMLOG_INLINE_OUTPUT_BYTES": "1000"}).inline_output_bytes == 1000
    with pytest.raises(ConfigError, match="SWARMLOG_INLINE_OUTPUT_BYTES"):
        Settings(inline_output_bytes=990_000)


def test_a_user_is_shown_where_an_output_artifact_is_or_why_it_cannot_be_read(tmp_path):
    store = BlobDirectory(tmp_path)
    ref = store.put(b"x" * 100)
    assert shown("inline", store) == "inline"
    assert shown(str(ref), store) == f"{ref} (100 bytes at {store.path(ref)})"
    store.path(ref).write_bytes(b"y")
    assert shown(str(ref), store).startswith(f"{ref} (unreadable: artifact {ref} is corrupt")


async def test_the_console_serves_an_artifact_and_says_why_it_cannot(tmp_path):
    store = BlobDirectory(tmp_path)
    ref = store.put(b"the generated file")
    app = application(Feed(Settings(artifacts_dir=tmp_path)), ConsoleSettings("127.0.0.1", 8765, None))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as client:
        assert (await client.get(f"/api/artifacts/{ref}")).content == b"the generated file"
        assert (await client.get(f"/api/artifacts/{ArtifactRef.of(b'other')}")).status_code == 404
        assert (await client.get("/api/artifacts/not-a-reference")).status_code == 400
        store.path(ref).write_bytes(b"the generated filE")
        answer = await client.get(f"/api/artifacts/{ref}")
        assert answer.status_code == 500 and "corrupt" in answer.json()["error"]


def test_a_history_lists_the_artifacts_its_events_reference_and_copies_them_beside_itself(tmp_path):
    store = BlobDirectory(tmp_path / "store")
    kept, lost = store.put(b"kept"), ArtifactRef.of(b"lost")
    codec = default_codec()
    records = [
        Record(TASK_EVENTS, 0, offset, 1, b"m", codec.encode(completed(output)))
        for offset, output in enumerate([str(kept), "inline", str(lost), str(kept)])
    ] + [Record(TASK_EVENTS, 0, 4, 1, None, b"garbage artifact:sha256:")]
    assert referenced(records) == sorted([kept, lost], key=lambda ref: ref.sha256)
    history = tmp_path / "h.hist"
    copied = checked(referenced(records), store, copy_to=beside(history))
    assert {(c.ref, c.problem is None) for c in copied} == {(str(kept), True), (str(lost), False)}
    assert beside(history).get(kept) == b"kept" and beside(history).root == tmp_path / "h.hist.artifacts"
