"""The coordinator shell on real brokers: missions complete through restarts and kill -9, each attempt once."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

import pytest

from swarmlog.coordinator.inbox import Message
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.coordinator.shell import folded as snapshots
from swarmlog.coordinator.shell.delivery import Delivery
from swarmlog.coordinator.shell.folded import FoldedJournal
from swarmlog.envelope import stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import (
    AgentDeregistered,
    AgentRegistered,
    ConsensusReached,
    MissionCompleted,
    MissionRejected,
    TaskAssigned,
    TaskCrossChecked,
    TaskResultRecorded,
    VoteRecorded,
)
from swarmlog.settings import Settings
from swarmlog.topics import REGISTRY

from .harness import E, task
from .live import ScriptedAgent, attempts, crew, eventually, journal, named, submit


def assert_each_attempt_once(events: list, agents: list[ScriptedAgent]) -> None:
    """Every attempt was assigned and recorded once, and run once by exactly one agent."""
    assigned, recorded = attempts(events, TaskAssigned), attempts(events, TaskResultRecorded)
    assert set(assigned.values()) == {1} and set(recorded.values()) == {1}
    runs = [attempt for agent in agents for attempt in agent.runs]
    assert sorted(runs) == sorted(assigned)


async def completed(settings: Settings, region: str, mission_id: str) -> list | None:
    """The mission's journal events once it has completed."""
    events = await journal(settings, region, mission_id)
    return events if named(events, MissionCompleted) else None


async def test_a_pipeline_completes_through_a_coordinator_restart(settings: Settings, tmp_path: Path):
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"pipe-{uuid.uuid4().hex[:8]}"
    pipeline = [
        task("a", capability),
        task("b", capability, depends_on=["a"]),
        task("c", capability, depends_on=["b"], replicas=2),
    ]
    async with crew(settings, "region-0", 3, capability, first_slot=0, latency_s=0.3) as agents:
        service = CoordinatorService(settings, "region-0", data_dir=tmp_path)
        await service.start()
        await submit(settings, mission_id, "region-0", pipeline)
        await eventually(lambda: _recorded(settings, mission_id, "a"))
        await service.stop()
        async with CoordinatorService(settings, "region-0", data_dir=tmp_path) as restarted:
            events = await eventually(lambda: completed(settings, "region-0", mission_id))
            assert restarted.folded.state.missions[mission_id].phase == "COMPLETED"
    [done] = named(events, MissionCompleted)
    # c's replicas answer differently (scripted agents do), so a tie-breaker runs on the third agent: c is disputed,
    # and the ballot chooses among its three outputs.
    assert [(c.outcome, c.tie_breaker) for c in named(events, TaskCrossChecked)] == [
        ("TIE_BREAK", 2),
        ("DISPUTED", None),
    ]
    assert (done.success, done.tasks_completed, done.tokens_used) == (True, 5, 25)
    assert len(named(events, VoteRecorded)) >= 2 and len(named(events, ConsensusReached)) == 1
    assert_each_attempt_once(events, agents)


async def _recorded(settings: Settings, mission_id: str, task_id: str) -> bool:
    """Whether a result of the task is in region-0's journal."""
    events = await journal(settings, "region-0", mission_id)
    return any(event.task_id == task_id for event in named(events, TaskResultRecorded))


async def test_two_regions_run_their_own_missions_side_by_side(settings: Settings, tmp_path: Path):
    suffix = uuid.uuid4().hex[:8]
    async with contextlib.AsyncExitStack() as stack:
        for index, region in enumerate(("region-2", "region-3")):
            capability = f"{region}-{suffix}"
            await stack.enter_async_context(crew(settings, region, 2, capability, first_slot=10 + 2 * index))
            await stack.enter_async_context(CoordinatorService(settings, region, data_dir=tmp_path))
            await submit(settings, f"m-{capability}", region, [task("a", capability), task("b", capability)])
        for region in ("region-2", "region-3"):
            events = await eventually(lambda region=region: completed(settings, region, f"m-{region}-{suffix}"))
            assert {e.agent_id for e in named(events, TaskAssigned)} <= {
                f"{region}-{suffix}-0",
                f"{region}-{suffix}-1",
            }


@pytest.mark.slow
async def test_kill_9_three_times_during_a_50_task_mission_doubles_nothing(settings: Settings, tmp_path: Path):
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"chaos-{uuid.uuid4().hex[:8]}"
    chains = [task(f"t{i}", capability, depends_on=[f"t{i - 5}"] if i >= 5 else []) for i in range(50)]
    env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    command = [sys.executable, "-m", "swarmlog", "coordinator", "--region", "region-1", "--data-dir", str(tmp_path)]
    async with crew(settings, "region-1", 5, capability, first_slot=20, latency_s=0.1) as agents:
        process = subprocess.Popen(command, env=env)
        await submit(settings, mission_id, "region-1", chains)
        try:
            for kill_after in (8, 20, 32):
                await eventually(lambda n=kill_after: _results_at_least(settings, mission_id, n))
                assert process.poll() is None, "the coordinator died on its own"
                process.send_signal(signal.SIGKILL)
                process.wait()
                process = subprocess.Popen(command, env=env)
            events = await eventually(lambda: completed(settings, "region-1", mission_id), timeout_s=90)
        finally:
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=30) == 0
    assert named(events, MissionCompleted)[0].tasks_completed == 50
    assert_each_attempt_once(events, agents)
    resent = sum(agent.duplicates for agent in agents)
    assert resent <= 3 * len(agents), "only the last write before each kill is re-sent: an assignment per agent at most"


async def test_a_crash_between_journal_write_and_inbox_sends_loses_nothing_and_runs_each_task_once(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"crash-{uuid.uuid4().hex[:8]}"
    sends = Delivery.inbox

    async def crash_before_sending_ours(delivery: Delivery, messages: list[Message]) -> None:
        if any(message.event.mission_id == mission_id for message in messages):
            raise RuntimeError("the coordinator died after its journal write, before its inbox sends")
        await sends(delivery, messages)

    async with crew(settings, "region-3", 4, capability, first_slot=34) as agents:
        monkeypatch.setattr(Delivery, "inbox", crash_before_sending_ours)
        crashed = CoordinatorService(settings, "region-3", data_dir=tmp_path)
        await crashed.start()
        await eventually(lambda: _enlisted(crashed, agents))
        await submit(settings, mission_id, "region-3", [task(f"t{i}", capability) for i in range(4)])
        with pytest.raises(RuntimeError, match="before its inbox sends"):
            await crashed.wait(asyncio.Event())
        with pytest.raises(RuntimeError):
            await crashed.stop()
        assigned = named(await journal(settings, "region-3", mission_id), TaskAssigned)
        assert len(assigned) == 4 and not any(agent.runs for agent in agents), "journaled, and nothing sent"
        monkeypatch.undo()
        async with CoordinatorService(settings, "region-3", data_dir=tmp_path):  # re-sends the last write's messages
            events = await eventually(lambda: completed(settings, "region-3", mission_id))
    assert named(events, TaskAssigned)[:4] == assigned, "the redelivered mission decided nothing new"
    assert_each_attempt_once(events, agents)


async def _enlisted(service: CoordinatorService, agents: Sequence[ScriptedAgent]) -> bool:
    """Whether the coordinator has enlisted every one of the agents."""
    return all(agent.agent_id in service.folded.state.agents for agent in agents)


async def _results_at_least(settings: Settings, mission_id: str, count: int) -> bool:
    """Whether region-1's journal holds at least `count` results of the mission."""
    return len(named(await journal(settings, "region-1", mission_id), TaskResultRecorded)) >= count


async def _journal_something(settings: Settings, service: CoordinatorService) -> None:
    """An agent of region-0 registers and leaves at once, so the journal has a last event (and nobody to route to)."""
    agent_id = f"passing-{uuid.uuid4().hex[:8]}"
    async with EventProducer(settings, client_id="test") as producer:
        await producer.send(
            REGISTRY,
            stamp(
                AgentRegistered,
                producer="test",
                agent_id=agent_id,
                capabilities=["nothing"],
                model="scripted",
                brain="scripted",
                node="test",
                gpu=None,
                region="region-0",
                slot=63,
            ),
            key=agent_id,
        )
        await producer.send(
            REGISTRY,
            stamp(AgentDeregistered, producer="test", agent_id=agent_id, reason="a test passing by"),
            key=agent_id,
        )

    async def left() -> bool:
        agent = service.folded.state.agents.get(agent_id)
        return agent is not None and not agent.alive

    await eventually(left, timeout_s=30)


def _undisturbed(settings: Settings, data_dir: Path) -> CoordinatorService:
    """region-0's coordinator with timeouts no tick reaches: other tests' missions on region-0's journal end, and a
    tick that retired one between two folds would make them differ by that event."""
    forever = 10**12
    return CoordinatorService(
        settings,
        "region-0",
        data_dir=data_dir,
        start_timeout_ms=forever,
        retain_ended_ms=forever,
        retain_slot_ms=forever,
        retain_goodbye_slot_ms=forever,
    )


def _another_cluster(folded: FoldedJournal) -> FoldedJournal:
    return dataclasses.replace(folded, origin=dataclasses.replace(folded.origin, cluster_id="another-cluster"))


def _recreated_topic(folded: FoldedJournal) -> FoldedJournal:
    return dataclasses.replace(folded, origin=dataclasses.replace(folded.origin, log_start=folded.origin.log_start + 7))


def _past_the_end(folded: FoldedJournal) -> FoldedJournal:
    return dataclasses.replace(folded, offset=folded.offset + 1000, tip=(folded.offset + 1000, "from a longer log"))


def _another_event_at_the_tip(folded: FoldedJournal) -> FoldedJournal:
    return dataclasses.replace(folded, tip=(folded.tip[0], "not-what-the-journal-holds"))


@pytest.mark.parametrize(
    ("stale", "says"),
    [
        (_another_cluster, "cluster another-cluster"),
        (_recreated_topic, "the partition's log now starts at offset"),
        (_past_the_end, "the log ends before it"),
        (_another_event_at_the_tip, "the topic was recreated"),
    ],
)
async def test_a_snapshot_from_elsewhere_is_detected_logged_and_the_journal_re_folded(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture, stale, says: str
):
    async with _undisturbed(settings, tmp_path / "fresh") as fresh:
        await _journal_something(settings, fresh)
        expected = fresh.folded
    assert expected.origin is not None and expected.tip is not None
    assert expected.origin.cluster_id  # Kafka's id; Tansu says tansu_cluster, the same for every Tansu broker
    snapshots.save(tmp_path / "stale" / "region-0", stale(expected))
    with caplog.at_level(logging.WARNING, logger="swarmlog.coordinator"):
        async with _undisturbed(settings, tmp_path / "stale") as recovered:
            assert (recovered.folded.state, recovered.folded.offset) == (expected.state, expected.offset)
    [warning] = [r.getMessage() for r in caplog.records if "not resuming from the coordinator snapshot" in r.message]
    assert says in warning and "SWARMLOG_BOOTSTRAP" in warning, warning
    assert snapshots.load(tmp_path / "stale" / "region-0").origin == expected.origin  # replaced by the re-fold


async def test_a_snapshot_that_still_matches_is_resumed_from(
    settings: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    async with _undisturbed(settings, tmp_path) as first:
        expected = first.folded
    with caplog.at_level(logging.WARNING, logger="swarmlog.coordinator"):
        async with _undisturbed(settings, tmp_path) as again:
            assert (again.folded.state, again.folded.offset) == (expected.state, expected.offset)
    assert not [r for r in caplog.records if "not resuming" in r.getMessage()]


async def test_a_running_coordinator_snapshots_every_n_journal_events(settings: Settings, tmp_path: Path):
    async with CoordinatorService(settings, "region-0", data_dir=tmp_path, snapshot_every_events=1) as service:
        started = snapshots.load(tmp_path / "region-0")
        await _journal_something(settings, service)

        async def saved() -> bool:
            try:
                snapshot = snapshots.load(tmp_path / "region-0")
            except Exception:  # RocksDB's lock: the service is writing it right now
                return False
            return snapshot is not None and snapshot.offset == service.folded.offset

        await eventually(saved, timeout_s=10)  # while it runs, not only at stop
        assert service.folded.offset > (started.offset if started else -1)


async def test_a_mission_larger_than_one_write_is_rejected_one_near_it_waits_for_ticks_and_a_wide_one_completes(
    settings: Settings, tmp_path: Path
):
    small = dataclasses.replace(settings, max_message_bytes=200_000)  # a journal write of 200 KB at most
    suffix = uuid.uuid4().hex[:8]
    huge, near, many, capability = f"huge-{suffix}", f"near-{suffix}", f"many-{suffix}", f"size-{suffix}"
    async with (
        crew(small, "region-0", 4, capability, first_slot=0, latency_s=0.01) as agents,
        CoordinatorService(small, "region-0", data_dir=tmp_path) as service,
    ):
        await eventually(lambda: _enlisted(service, agents))
        # 240 KB of prompts (sent by a client allowed 1 MB): its acceptance alone does not fit one write.
        await submit(settings, huge, "region-0", _prompts(4, capability))
        # 180 KB: its acceptance fits, not with the assignments it would make to the idle agents, so the acceptance
        # is written alone and ticks route its tasks; in whichever order the two are read.
        await submit(small, near, "region-0", _prompts(3, capability))
        [rejected] = await eventually(lambda: _named_in_journal(small, huge, MissionRejected))
        near_events = await eventually(lambda: completed(small, "region-0", near), timeout_s=60)
        # 400 tasks: about 217 KB of routing events, more than one decision holds; ticks route the rest.
        await submit(small, many, "region-0", [task(f"t{index}", capability) for index in range(400)])
        events = await eventually(lambda: completed(small, "region-0", many), timeout_s=120)
        assert service.folded.state.missions[many].phase == "COMPLETED"
    assert "over the 200000-byte limit" in rejected.reason and "split it into smaller missions" in rejected.reason
    assert named(near_events, MissionCompleted)[0].tasks_completed == 3
    assert named(events, MissionCompleted)[0].tasks_completed == 400
    assert_each_attempt_once(near_events + events, agents)


def _prompts(count: int, capability: str) -> list[dict]:
    """`count` tasks of 60 KB prompts each."""
    return [task(f"p{index}", capability) | {"prompt": "x" * 60_000} for index in range(count)]


async def _named_in_journal(settings: Settings, mission_id: str, kind: type[E]) -> list[E]:
    """The mission's events of one class in region-0's journal."""
    return named(await journal(settings, "region-0", mission_id), kind)
