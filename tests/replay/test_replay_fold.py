"""The replay's pieces without a broker: ordering, problems with coordinates, spans, diffs, determinism, files."""

from __future__ import annotations

import dataclasses
import gzip
from pathlib import Path

import pytest
import typer
from coordinator.harness import task
from replay_scenarios import HISTORIES, REGIONS, RecordedSwarm

from swarmlog.commands.replay import parse_at
from swarmlog.coordinator.progress import PROGRESS, REJECTED
from swarmlog.envelope import stamp
from swarmlog.replay import history
from swarmlog.replay.components import COMPONENTS, component
from swarmlog.replay.diff import Difference, differences
from swarmlog.replay.fold import Record, ordered, replay
from swarmlog.replay.source import Span
from swarmlog.replay.timeline import timeline
from swarmlog.replay.verify import verify
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.records import JournalRecordsSkipped
from swarmlog.topics import ALERTS, JOURNAL, WAITS

GOLDEN = history.load(HISTORIES / "three_phase.hist").records


def test_each_partition_stays_in_offset_order_and_partitions_merge_by_timestamp():
    records = [Record("a", 0, 0, 30, None, b""), Record("a", 0, 1, 10, None, b""), Record("b", 0, 0, 20, None, b"")]
    assert [(r.topic, r.offset) for r in ordered(records)] == [("b", 0), ("a", 0), ("a", 1)]


def test_a_garbage_record_is_a_problem_at_its_coordinates_and_the_replay_goes_on():
    garbage = Record(JOURNAL, 0, 10_000, GOLDEN[0].timestamp, None, b"\xc3\x01not avro")
    clean = replay(component("coordinator"), None, REGIONS, GOLDEN)
    dirty = replay(component("coordinator"), None, REGIONS, (garbage, *GOLDEN))
    [problem] = dirty.problems
    assert (problem.topic, problem.partition, problem.offset) == (JOURNAL, 0, 10_000)
    assert (dirty.state, dirty.events) == (clean.state, clean.events)
    assert not verify((garbage, *GOLDEN), REGIONS, [(component("coordinator"), None)]).ok


def test_a_garbage_journal_record_a_repair_names_is_reported_as_skipped_and_verify_passes():
    journal = [record for record in GOLDEN if record.topic == JOURNAL]
    last = max(record.offset for record in journal)
    garbage = Record(JOURNAL, 0, last + 1, journal[-1].timestamp, None, b"\xc3\x01not avro")
    unrelated = Record(JOURNAL, 0, last + 2, journal[-1].timestamp, None, b"\xc3\x01also bad")
    repair = stamp(
        JournalRecordsSkipped,
        producer="operator:ops",
        region="region-0",
        partition=0,
        offsets=[last + 1],
        errors=["bad"],
        reason="test garbage",
        operator="ops",
        occurred_at_ms=journal[-1].timestamp,
    )
    repaired = Record(JOURNAL, 0, last + 3, journal[-1].timestamp, None, default_codec().encode(repair))
    records = (*GOLDEN, garbage, unrelated, repaired)
    dirty = replay(component("coordinator"), None, REGIONS, records)
    skipped, left = dirty.problems
    assert (skipped.offset, left.offset) == (last + 1, last + 2)
    assert "ops: test garbage" in skipped.skipped and left.skipped is None
    assert dirty.state == replay(component("coordinator"), None, REGIONS, GOLDEN).state
    assert not verify(records, REGIONS, [(component("coordinator"), None)]).ok  # one is not repaired
    assert verify((*GOLDEN, garbage, repaired), REGIONS, [(component("coordinator"), None)]).ok


def test_verify_catches_a_fold_that_is_not_deterministic():
    calls = iter(range(10**6))
    registry = COMPONENTS["registry"]
    flaky = dataclasses.replace(
        registry,
        projection=dataclasses.replace(
            registry.projection,
            evolve_all=None,
            evolve=lambda state, event: dataclasses.replace(state, agents={**state.agents, "n": next(calls)}),
        ),
    )
    [check] = verify(GOLDEN, REGIONS, [(flaky, None)]).checks
    assert not check.deterministic


def test_a_span_keeps_records_between_its_offsets_and_times_inclusive():
    record = Record("t", 0, 5, 1000, None, b"")
    assert Span(from_offset=5, to_offset=5, from_ms=1000, to_ms=1000).keeps(record)
    assert not Span(to_offset=4).keeps(record) and not Span(from_ms=1001).keeps(record)


def test_at_is_an_offset_epoch_ms_or_an_iso_time():
    assert parse_at("42") == Span(to_offset=42)
    assert parse_at("1750000000000") == Span(to_ms=1_750_000_000_000)
    assert parse_at("2025-06-15T15:06:40+00:00") == Span(to_ms=1_750_000_000_000)
    with pytest.raises(typer.BadParameter):
        parse_at("yesterday")


def test_differences_name_the_key_and_both_values():
    assert differences({"a": 1, "b": 2}, {"b": 3, "c": 4}) == (
        Difference("a", 1, None),
        Difference("b", 2, 3),
        Difference("c", None, 4),
    )


def test_a_history_file_round_trips_and_names_the_schemas_it_uses(tmp_path: Path):
    path = tmp_path / "copy.hist"
    history.export(path, GOLDEN, REGIONS, {"mission": "m-three"})
    loaded = history.load(path)
    assert loaded.records == GOLDEN and loaded.regions == REGIONS
    assert "MissionAccepted v4" in loaded.header["schemas"].values()  # the goldens are at the current versions
    journal = (JOURNAL,)
    assert history.load(path, journal).records == tuple(r for r in GOLDEN if r.topic in journal)
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-3]))
    with pytest.raises(ValueError, match="truncated"):
        history.load(path, journal)  # a cut frame is reported whichever topics are read


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"not gzip at all", "not a readable swarmlog-history file: BadGzipFile"),
        (gzip.compress(b'{"format": "swarmlog-history", "version": 2}\n' + b"x" * 64)[:-12], "EOFError"),
        (gzip.compress(b"[1, 2]\n"), "is not a swarmlog-history v2 file"),
        (gzip.compress(b'{"format": "swarmlog-history", "version": 2}\n'), "KeyError"),
        (
            gzip.compress(b'{"format": "swarmlog-history", "version": 2, "topics": ["t"]}\n' + b"\x07" * 10),
            "a frame header at byte",
        ),
        (
            gzip.compress(b'{"format": "swarmlog-history", "version": 2, "topics": ["t"]}\n' + b"\x07" * 64),
            "names topic #1799",
        ),
    ],
    ids=[
        "not gzip",
        "cut gzip",
        "header not an object",
        "header without topics",
        "cut frame header",
        "unknown topic index",
    ],
)
def test_a_file_that_is_not_a_history_is_a_value_error_saying_why(tmp_path: Path, content: bytes, says: str):
    path = tmp_path / "bad.hist"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=says):
        history.load(path)


def test_a_keyed_component_needs_its_key():
    with pytest.raises(ValueError, match="--key"):
        replay(component("agent"), None, REGIONS, GOLDEN)
    assert replay(component("agent"), "a1", REGIONS, GOLDEN).state.closed  # a1 ran and closed an attempt


def test_an_event_of_a_kind_its_topic_does_not_carry_is_a_problem_and_is_not_folded():
    """Given the deadlock history, when a copy of its DeadlockDetected also lies on swarm.waits (which carries waits
    only) before the waits it names, then replay reports it at its coordinates, folds as without it, and verify fails,
    as the streams worker dead-letters it instead of folding it."""
    records = history.load(HISTORIES / "deadlock.hist").records
    [alert] = [record for record in records if record.topic == ALERTS]
    waits = [record for record in records if record.topic == WAITS]
    misplaced = Record(WAITS, 0, 10_000, waits[0].timestamp - 1, None, alert.value)
    clean = replay(component("waitgraph"), None, REGIONS, records)
    dirty = replay(component("waitgraph"), None, REGIONS, (misplaced, *records))
    [problem] = dirty.problems
    assert (problem.topic, problem.partition, problem.offset) == (WAITS, 0, 10_000)
    assert "DeadlockDetected" in problem.reason and "does not belong on swarm.waits" in problem.reason
    assert (dirty.state, dirty.events) == (clean.state, clean.events)
    assert verify(records, REGIONS, [(component("waitgraph"), None)]).ok
    assert not verify((misplaced, *records), REGIONS, [(component("waitgraph"), None)]).ok


def test_the_timeline_s_phase_is_the_mission_s_progress_phase_rejected_included():
    swarm = RecordedSwarm()
    swarm.submit("m-bad", [task("a")], planning={"prompt": "plan", "required_capabilities": []})  # both: rejected
    steps, problems = timeline(swarm.records, "m-bad")
    assert problems == []
    assert [step.phase for step in steps] == ["SUBMITTED", REJECTED]
    assert PROGRESS.rebuild("m-bad", swarm.journal).phase == REJECTED
