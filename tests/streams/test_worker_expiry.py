"""Bounded tables on the live worker: a deregistered agent's view and an old window's usage expire on their
partition's event time, the changelog forgets them (a worker restored from it holds them no more), and the tables
stay equal to the replay of their topics."""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from aiokafka.partitioner import DefaultPartitioner
from faust.serializers import codecs
from worker_harness import Client, Worker, now_event, registered, table_differences, tables_settled

from swarmlog.envelope import now_ms
from swarmlog.kafka.admin import ensure_topics
from swarmlog.replay.diff import read_table
from swarmlog.replay.source import read
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings
from swarmlog.topics import spec_for

pytestmark = pytest.mark.slow
REGISTRY, USAGE = "swarm.agents.registry", "swarm.usage"
LONG_AGO = timedelta(hours=2)


@pytest.fixture
def settings(own_broker, redis_url: str) -> Settings:
    """A broker of the module's own: on the suite's shared one a new worker first folds every earlier test's registry,
    heartbeats and usage (minutes of them at the end of the suite), which is the recovery bench's measure, not this
    test's subject."""
    configured = dataclasses.replace(
        Settings.from_env(), broker=own_broker.kind, bootstrap=own_broker.bootstrap, redis_url=redis_url
    )
    asyncio.run(ensure_topics(configured))
    return configured


def sharing_a_partition(settings: Settings, run: str, names: tuple[str, ...]) -> list[str]:
    """An agent id per name, all on one partition of the agent-keyed topics (as the clients' partitioner puts them),
    so the later ones' events make the earlier ones' partition's event time."""
    partitions = list(range(spec_for(settings, REGISTRY).partitions))

    def partition_of(agent: str) -> int:
        return DefaultPartitioner()(agent.encode(), partitions, partitions)

    first = f"{names[0]}-{run}"
    return [first] + [
        next(agent for n in itertools.count() if partition_of(agent := f"{name}-{run}-{n}") == partition_of(first))
        for name in names[1:]
    ]


def long_ago(event: Event, by: timedelta = LONG_AGO) -> Event:
    """The event as if it had happened `by` ago (event time is what expiry counts)."""
    return msgspec.structs.replace(event, occurred_at=now_ms() - by // timedelta(milliseconds=1))


async def changelog_history(settings: Settings, app_id: str, table: str, keys: set[str]) -> dict[str, list[bool]]:
    """For each of `keys`, the changelog records of `table` in order: True for a value, False for a tombstone."""
    history: dict[str, list[bool]] = {key: [] for key in keys}
    for record in (await read(settings, [f"{app_id}-{table}-changelog"])).records:
        key = codecs.loads("json", record.key)
        if key in history:
            history[key].append(record.value is not None)
    return history


async def written(settings: Settings, app_id: str, rows: dict[str, str], timeout_s: float = 180) -> None:
    """Wait until each table's changelog holds a value for its row (the worker folded and wrote it)."""
    deadline = time.monotonic() + timeout_s
    for table, key in rows.items():
        while True not in (await changelog_history(settings, app_id, table, {key}))[key]:
            assert time.monotonic() < deadline, f"rows {rows} not written to the changelogs within {timeout_s} s"
            await asyncio.sleep(0.5)


def test_expired_rows_leave_the_table_and_its_changelog_and_the_tables_stay_the_replay(
    settings: Settings, tmp_path: Path
):
    run = uuid.uuid4().hex[:6]
    gone, newcomer, spent, spender = sharing_a_partition(settings, run, ("gone", "newcomer", "spent", "spender"))
    client = Client(settings.bootstrap)
    knobs = {"liveness_timeout_ms": 3 * 3_600_000}  # nobody dies of silence here: these runs are hours old
    first = Worker(settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "first", **knobs)
    first.start()
    try:
        client.send(
            REGISTRY,
            gone,
            long_ago(registered(gone)),
            long_ago(now_event("AgentDeregistered", agent_id=gone, reason="shutdown")),
        )
        client.send(
            USAGE,
            spent,
            long_ago(
                now_event(
                    "TokensUsed",
                    agent_id=spent,
                    generation_id=f"g-{run}",
                    prompt_tokens=10,
                    completion_tokens=5,
                    mission_id=None,
                    task_id=None,
                )
            ),
        )
        # The old rows are written before the new events expire them: folded in one chunk with those, they would
        # never reach the table at all (the chunk writes each row once, at its end).
        asyncio.run(written(settings, first.app_id, {"registry": gone, "budgets": spent}))
        client.send(REGISTRY, newcomer, registered(newcomer))
        client.send(
            USAGE,
            spender,
            now_event(
                "TokensUsed",
                agent_id=spender,
                generation_id=f"g2-{run}",
                prompt_tokens=10,
                completion_tokens=5,
                mission_id=None,
                task_id=None,
            ),
        )
        asyncio.run(tables_settled(settings, first.app_id, run, ("registry", "budgets")))
        assert not asyncio.run(table_differences(settings, first.app_id, run, ("registry", "budgets")))
        live = {
            table: asyncio.run(read_table(settings, f"{first.app_id}-{table}-changelog", first.app_id))[0]
            for table in ("registry", "budgets")
        }
        history = {
            table: asyncio.run(changelog_history(settings, first.app_id, table, keys))
            for table, keys in (("registry", {gone, newcomer}), ("budgets", {spent, spender}))
        }
    finally:
        assert first.stop(signal.SIGTERM) == 0
    assert newcomer in live["registry"] and gone not in live["registry"]
    assert spender in live["budgets"] and spent not in live["budgets"]
    assert history["registry"][gone][-1] is False and True in history["registry"][gone], history
    assert history["budgets"][spent][-1] is False and True in history["budgets"][spent], history
    assert {agent for agent in first.table("registry") if run in agent} == {newcomer}

    second = Worker(settings.bootstrap, settings.broker, settings.redis_url, tmp_path / "second", **knobs)
    second.app_id = first.app_id  # the same application on a new machine: its tables come from the changelogs
    second.env["SWARMLOG_STREAMS_APP_ID"] = first.app_id
    second.start()
    assert second.stop(signal.SIGTERM) == 0
    assert {agent for agent in second.table("registry") if run in agent} == {newcomer}
    assert {agent for agent in second.table("budgets") if run in agent} == {spender}
