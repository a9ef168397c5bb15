"""`swarmlog replay` on Apache Kafka after a live run of the coordinator shell with scripted agents."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import uuid
from pathlib import Path

import pytest
import replay_scenarios  # noqa: F401  (it puts tests/ on sys.path, for the coordinator's test helpers)
from aiokafka import AIOKafkaProducer
from coordinator.harness import task
from coordinator.live import crew, eventually, journal, submit
from typer.testing import CliRunner, Result

from swarmlog.cli import app
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.coordinator.shell import folded as snapshots
from swarmlog.schemas.records import MissionCompleted
from swarmlog.settings import Settings
from swarmlog.topics import TASK_EVENTS

pytestmark = pytest.mark.kafka_only
REGION = "region-0"


async def replay(settings: Settings, *args: str) -> Result:
    """`swarmlog replay ARGS --json` against the test's broker (in a thread: it runs its own event loop)."""
    env = {"SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    return await asyncio.to_thread(CliRunner().invoke, app, ["replay", *args, "--json"], env=env)


@pytest.fixture
async def live_run(settings: Settings, tmp_path: Path) -> tuple[str, str, Path]:
    """A two-task mission run to completion by the coordinator shell and two scripted agents; (mission, agent, dir)."""
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"replay-{uuid.uuid4().hex[:8]}"
    # A start timeout other than the default: a flag of the process, which replay does not take and need not know.
    async with (
        crew(settings, REGION, 2, capability, 40) as agents,
        CoordinatorService(settings, REGION, data_dir=tmp_path, start_timeout_ms=20_000),
    ):
        await submit(settings, mission_id, REGION, [task("a", capability), task("b", capability)])
        await eventually(lambda: _completed(settings, mission_id))
    return mission_id, agents[0].agent_id, tmp_path


async def _completed(settings: Settings, mission_id: str) -> bool:
    return any(isinstance(event, MissionCompleted) for event in await journal(settings, REGION, mission_id))


async def test_after_a_live_run_verify_and_diff_pass_and_the_timeline_shows_the_mission(
    settings: Settings, live_run: tuple[str, str, Path]
):
    mission_id, _agent_id, data_dir = live_run
    verified = await replay(settings, "verify", "coordinator", "--key", REGION, "--data-dir", str(data_dir))
    assert verified.exit_code == 0, verified.output
    report = json.loads(verified.output)
    assert report["checks"][0]["deterministic"] is True
    [live] = report["live"]
    assert live["live"].startswith(f"snapshot {data_dir / REGION}") and live["differences"] == 0
    compared = await replay(settings, "diff", "coordinator", "--key", REGION, "--data-dir", str(data_dir))
    assert compared.exit_code == 0, compared.output
    shown = await replay(settings, "timeline", mission_id)
    assert shown.exit_code == 0, shown.output
    shown = json.loads(shown.output)
    names = [step["name"] for step in shown["steps"]]
    assert names[0] == "MissionSubmitted" and names[-1] == "MissionCompleted" and names.count("TaskCompleted") == 2
    state = json.loads((await replay(settings, "state", "mission", "--key", mission_id)).output)
    assert state["state"]["mission"]["phase"] == "COMPLETED"


async def test_a_corrupted_snapshot_makes_diff_fail_with_the_key_and_both_values(
    settings: Settings, live_run: tuple[str, str, Path]
):
    mission_id, _, data_dir = live_run
    saved = snapshots.load(data_dir / REGION)
    mission = saved.state.missions[mission_id]
    corrupted = dataclasses.replace(
        saved.state, missions={**saved.state.missions, mission_id: dataclasses.replace(mission, tokens=999)}
    )
    snapshots.save(data_dir / REGION, dataclasses.replace(saved, state=corrupted))
    compared = await replay(settings, "diff", "coordinator", "--key", REGION, "--data-dir", str(data_dir))
    assert compared.exit_code == 1
    [difference] = json.loads(compared.output)["differences"]
    assert difference["key"] == f"missions/{mission_id}"
    assert (difference["rebuilt"]["tokens"], difference["live"]["tokens"]) == (mission.tokens, 999)
    verified = await replay(settings, "verify", "coordinator", "--key", REGION, "--data-dir", str(data_dir))
    assert verified.exit_code == 1 and json.loads(verified.output)["live"][0]["differences"] == 1


async def test_verify_reports_a_garbage_record_with_its_coordinates_and_replays_the_rest(
    settings: Settings, live_run: tuple[str, str, Path]
):
    _, agent_id, _ = live_run
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        sent = await producer.send_and_wait(TASK_EVENTS, b"\xc3\x01garbage", partition=0)
    finally:
        await producer.stop()
    verified = await replay(settings, "verify", "agent", "--key", agent_id)
    assert verified.exit_code == 1
    report = json.loads(verified.output)
    assert {"topic": "swarm.tasks.events", "partition": 0, "offset": sent.offset} in [
        {k: p[k] for k in ("topic", "partition", "offset")} for p in report["problems"]
    ]
    assert report["checks"][0]["events"] >= 2, "the records after and around the garbage were still folded"
