"""Table values: the folds' records round-trip through the changelog codec, and anything else in the bytes (code to
run on load above all) is refused, by the worker and by `swarmlog replay diff`."""

from __future__ import annotations

import asyncio
import os
import pickle
import uuid
from pathlib import Path
from typing import NamedTuple

import pytest
from aiokafka import AIOKafkaProducer
from faust.serializers import codecs
from kafka_topics import create_topic
from streams_builders import event

from swarmlog.replay.components import COMPONENTS
from swarmlog.replay.diff import against_live, diff_table
from swarmlog.schemas.codec import encode
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings
from swarmlog.streams import registry
from swarmlog.streams.app.tables import CODEC, dump_key, dump_value, latest_rows, load_value
from swarmlog.streams.budgets import AgentUsage
from swarmlog.streams.persistent import PSet
from swarmlog.streams.registry import AgentView
from swarmlog.streams.waitgraph import Wait

ROWS = [
    AgentView("a", ("code", "review"), "m", "b", "n", None, "region-0", 3, 2, "reg", 5, 9, 4, "BUSY", "m/t/0/1"),
    AgentUsage(window_start=60_000, used=70, generations=PSet({"g1", "g2"}), exceeded_window=None, throttled_until=9),
    Wait("w-1", "agent-a", "agent-b", 1_000),
    ("agent-a", "agent-b", "agent-a"),
    41,
]


class _Planted:
    """Unpickling this writes a file: what a hostile changelog record would do with Faust's plain pickle codec."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple:
        return os.system, (f"touch {self.path}",)


def hostile(path: Path) -> bytes:
    """Table-value bytes (base64 pickle, as the changelog holds them) that would create `path` when loaded."""
    return codecs.dumps("binary", pickle.dumps(_Planted(path)))


@pytest.mark.parametrize("row", ROWS, ids=lambda row: type(row).__name__)
def test_a_fold_record_round_trips_and_reads_what_fausts_pickle_codec_wrote(row):
    assert load_value(codecs.dumps(CODEC, row)) == row
    assert load_value(codecs.dumps("pickle", row)) == row, "tables written before this codec still read"


def test_a_value_that_would_run_code_is_refused_before_it_runs(tmp_path: Path):
    planted = tmp_path / "ran"
    with pytest.raises(ValueError, match=r"posix.system is not a fold record"):
        load_value(hostile(planted))
    assert not planted.exists()


@pytest.mark.parametrize("raw", [b"", b"not base64 at all!", codecs.dumps("binary", b"\x80\x05garbage")])
def test_garbage_is_a_value_error(raw: bytes):
    with pytest.raises(ValueError):
        load_value(raw)


def test_diff_and_verify_report_hostile_and_garbage_changelog_rows_and_compare_the_rest(
    settings: Settings, tmp_path: Path
):
    app_id, agent_id, planted = f"tables-{uuid.uuid4().hex[:8]}", f"agent-{uuid.uuid4().hex[:8]}", tmp_path / "ran"
    registered = event(
        "AgentRegistered",
        1_000,
        f"reg-{agent_id}",
        agent_id=agent_id,
        capabilities=["code"],
        model="m",
        brain="scripted",
        node="n",
        gpu=None,
        region="region-0",
        slot=0,
    )
    view = registry.evolve_agent(None, registered)
    sent = asyncio.run(
        _produce(
            settings,
            f"{app_id}-registry-changelog",
            [(agent_id, codecs.dumps(CODEC, view)), ("hostile", hostile(planted)), ("garbage", b"\x00\x01")],
            registered,
        )
    )
    compared = asyncio.run(diff_table(settings, "registry", app_id))
    assert not planted.exists()
    bad = {(p.topic, p.partition, p.offset) for p in compared.live_problems if "not a table row" in p.reason}
    assert bad == {(f"{app_id}-registry-changelog", 0, sent[1]), (f"{app_id}-registry-changelog", 0, sent[2])}
    assert not [d for d in compared.differences if agent_id in d.key], "the readable row matched its rebuild"
    [registry_check, budgets_check] = asyncio.run(
        against_live(settings, [(COMPONENTS["registry"], None), (COMPONENTS["budgets"], None)], tmp_path, app_id)
    )
    assert (registry_check.live, registry_check.unreadable, registry_check.equal) == (
        f"changelog {app_id}-registry-changelog",
        2,
        False,
    )
    assert budgets_check.live is None and budgets_check.equal, "no budgets table: nothing to compare, said"
    assert f"no changelog topic {app_id}-budgets-changelog" in budgets_check.note


async def _produce(settings: Settings, changelog: str, rows: list[tuple[str, bytes]], registered: Event) -> list[int]:
    """The rows on a new one-partition changelog topic and `registered` on the registry topic; the rows' offsets."""
    await create_topic(settings.bootstrap, changelog)
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait("swarm.agents.registry", encode(registered), key=registered.agent_id.encode())
        return [
            (await producer.send_and_wait(changelog, value, key=codecs.dumps("json", key), partition=0)).offset
            for key, value in rows
        ]
    finally:
        await producer.stop()


class _Record(NamedTuple):
    key: bytes | None
    value: bytes | None


def test_latest_rows_keeps_the_last_value_of_each_key_drops_tombstones_and_skips_what_is_not_a_row():
    """Given a changelog with an update, a tombstone, a key that is not a JSON string and a value that is not a fold
    record, when its rows are read, then each key has its last value, the dropped key is gone, and the two bad records
    are skipped with why (the reader of a changelog that anyone could write does not stop)."""
    good = [_Record(dump_key(k), dump_value(v)) for k, v in (("a", ROWS[0]), ("b", ROWS[1]), ("a", ROWS[4]))]
    records = [*good, _Record(dump_key("b"), None), _Record(b"[1, 2]", dump_value(41)), _Record(dump_key("c"), b"junk")]

    rows, skipped = latest_rows(records)

    assert rows == {"a": ROWS[4]}
    assert [record for record, _ in skipped] == records[-2:]
    assert all(isinstance(why, ValueError) for _, why in skipped)
