"""Issue #19's acceptance test: garbage on every topic but the coordinators' journal while a live swarm runs a mission,
then kill -9 of an agent. The death is declared within the liveness timeout + 1 s, the mission completes with every
attempt's result journaled once, every garbage record is dead-lettered exactly once overall (by the one component
owning its topic's dead letters; none on topics no component reads for its effects), duplicates of real events are
deduped and never dead-lettered, and no process restarts.

A live swarm on Apache Kafka: the streams worker, the coordinators of both regions (`swarmlog coordinator`, the swarm
has SWARMLOG_REGIONS=2 so each coordinator owns the dead letters of half the partitions) and three scripted agents.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import TypeVar

import pytest
from aiokafka import TopicPartition
from coordinator.harness import task
from coordinator.live import attempts, eventually, journal, named, submit

from swarmlog.envelope import now_ms, stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import reader
from swarmlog.kafka.records import DEAD_LETTERED_BY, TOPIC_EVENTS, dead_letter
from swarmlog.replay import history
from swarmlog.schemas.codec import decode
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentEnlisted,
    AgentHeartbeat,
    AgentRegistered,
    DeadLetterRecorded,
    ExperienceRecorded,
    GroundTruthUpdated,
    MissionCompleted,
    SlotRequested,
    TaskCompleted,
    TaskFailed,
    TaskResultRecorded,
    TaskStarted,
    TokensUsed,
)
from swarmlog.settings import Settings
from swarmlog.topics import TOP_JOURNAL, spec_for

sys.path[:0] = [str(Path(__file__).parent / "streams"), str(Path(__file__).parent / "actors")]
from agent_harness import Log, start_agent, task_assigned
from worker_harness import Client, Coordinates, Worker, garbage, large_records_taken, stop_swarm

pytestmark = [pytest.mark.kafka_only, pytest.mark.slow]
JOURNAL, DEADLETTER, INBOX = "swarm.coordinator.journal", "swarm.deadletter", "swarm.agents.inbox"
FUZZED = tuple(sorted(topic for topic in TOPIC_EVENTS if topic not in (JOURNAL, TOP_JOURNAL)))  # journals: repair
REGIONS = 2
LIVENESS_TIMEOUT_MS = 3000
AGENTS, TASKS, FIRST_SLOT = 3, 24, 50
BRAIN = {"median_ms": 800}
HISTORIES = Path(__file__).parent / "histories"
ERRORS = ("DecodeError", "NotAnInput", "RejectedCommand", "InputRejected")
E = TypeVar("E", bound=Event)
CONSUMERS = {"coordinator": "swarmlog-coordinator-", "streams": "swarmlog-streams", "agent": "agent:"}


@pytest.fixture
def large_topics(settings: Settings) -> Iterator[None]:
    """Every fuzzed topic takes the 2 MB garbage record for the test."""
    with large_records_taken(settings, FUZZED):
        yield


async def test_garbage_on_every_topic_and_a_kill_9_lose_double_and_restart_nothing(
    settings: Settings, large_topics: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SWARMLOG_REGIONS", str(REGIONS))  # every process the test starts runs a two-region swarm
    capability = f"fuzz-{uuid.uuid4().hex[:8]}"
    agent_ids = [f"{capability}-{index}" for index in range(AGENTS)]
    survivor, victim = agent_ids[0], agent_ids[-1]
    mission_id = f"m-{capability}"
    async with swarm(settings, tmp_path, capability, agent_ids) as (processes, worker, log):
        await submit(settings, mission_id, "region-0", [task(f"t{i}", capability) for i in range(TASKS)])
        await log.wait_for(lambda: log.named(TaskStarted, mission_id=mission_id), timeout_s=60)

        # Garbage of every kind on every topic but the journal, next to a duplicate of a real event where there is one.
        real = await latest_records(settings, FUZZED, agent_ids)
        garbage_at, duplicates_at = await fuzz(settings, real, survivor)

        # Then kill -9 an agent, at a moment it works on a task if it gets one soon.
        await _in_flight(log, victim, mission_id)
        processes[victim].send_signal(signal.SIGKILL)
        processes[victim].wait(10)

        [death] = await _eventually_named(log, AgentDeclaredDead, agent_id=victim)
        events = await eventually(lambda: _completed(settings, mission_id), timeout_s=90)
        owned = {at for at, (kind, owner) in garbage_at.items() if owner is not None}
        with contextlib.suppress(AssertionError):  # what is missing is asserted below, with the figures
            await log.wait_for(lambda: owned <= set(_letters(log)), timeout_s=30)
        await asyncio.sleep(2)  # a second dead letter of a record would come about now
        exited = {name: process.returncode for name, process in processes.items() if process.poll() is not None}
        worker_alive = worker.process is not None and worker.process.poll() is None
        coordinator_logs = "".join(path.read_text(errors="replace") for path in tmp_path.glob("region-*.log"))

    # The death: declared within the liveness timeout + 1 s of the agent's last heartbeat (the requirement).
    [last_beat] = log.named(AgentHeartbeat, agent_id=victim)[-1:]
    declared_ms = death.occurred_at - last_beat.occurred_at
    # The mission: completed, each attempt's result journaled once.
    [done] = named(events, MissionCompleted)
    recorded = attempts(events, TaskResultRecorded)
    # The dead letters: one event per garbage record whose topic has an owner, none otherwise, none for duplicates.
    letters = _letters(log)
    counts = {at: len(letters.get(at, ())) for at in garbage_at}
    _report(garbage_at, counts, declared_ms, done, exited)

    assert 0 <= declared_ms - LIVENESS_TIMEOUT_MS <= 1000, f"declared {declared_ms} ms after the last heartbeat"
    assert (done.success, done.tasks_completed) == (True, TASKS), done
    assert set(recorded.values()) == {1}, recorded
    assert sorted(t for _, t, _, _ in recorded) == sorted(f"t{i}" for i in range(TASKS))
    wrong = {at: (garbage_at[at][0], count) for at, count in counts.items() if count != (garbage_at[at][1] is not None)}
    assert wrong == {}
    assert not [at for at in duplicates_at if at in letters], "a duplicate of a real event was dead-lettered"
    for at, (kind, owner) in garbage_at.items():
        for letter in letters.get(at, {}).values():
            assert letter.error_type in ERRORS, (at, kind, letter)
            assert letter.consumer.startswith(CONSUMERS[owner]), (at, letter.consumer)
            if owner == "coordinator":
                assert f"{at[0]}[{at[1]}]@{at[2]}" in coordinator_logs, f"no WARNING line for {at}"
    assert {at[1] % REGIONS for at, (_, owner) in garbage_at.items() if owner == "coordinator"} == {0, 1}
    assert exited == {victim: -signal.SIGKILL} and worker_alive, f"processes that exited: {exited}"
    assert [len({e.event_id for e in log.named(AgentRegistered, agent_id=agent)}) for agent in agent_ids] == [
        1
    ] * AGENTS


@contextlib.asynccontextmanager
async def swarm(
    settings: Settings, tmp_path: Path, capability: str, agent_ids: list[str]
) -> AsyncIterator[tuple[dict[str, subprocess.Popen], Worker, Log]]:
    """The streams worker, a coordinator per region and scripted agents, all enlisted; stopped (SIGTERM) after."""
    brain = tmp_path / "brain.json"
    brain.write_text(json.dumps(BRAIN))
    env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    worker = Worker(
        settings.bootstrap,
        settings.broker,
        settings.redis_url or "",
        tmp_path / "streams",
        liveness_timeout_ms=LIVENESS_TIMEOUT_MS,
    )
    processes: dict[str, subprocess.Popen] = {}
    mine = set(agent_ids)
    async with Log(
        settings,
        "swarm.agents.registry",
        "swarm.agents.heartbeats",
        "swarm.tasks.events",
        JOURNAL,
        DEADLETTER,
        keep=lambda e: (
            isinstance(e, DeadLetterRecorded)
            or getattr(e, "agent_id", None) in mine
            or capability in (getattr(e, "mission_id", None) or "")
        ),
    ) as log:
        try:
            for index in range(REGIONS):
                region = f"region-{index}"
                with (tmp_path / f"{region}.log").open("ab") as output:
                    processes[region] = subprocess.Popen(
                        [
                            sys.executable,
                            "-m",
                            "swarmlog",
                            "coordinator",
                            "--region",
                            region,
                            "--data-dir",
                            str(tmp_path / "coordinator"),
                        ],
                        env=env,
                        stdout=output,
                        stderr=subprocess.STDOUT,
                    )
            for index, agent_id in enumerate(agent_ids):
                processes[agent_id] = start_agent(
                    settings,
                    agent_id,
                    FIRST_SLOT + index,
                    tmp_path,
                    "--region",
                    "region-0",
                    "--capabilities",
                    capability,
                    "--brain",
                    "scripted",
                    "--model",
                    str(brain),
                )
            await asyncio.to_thread(worker.start)
            await log.wait_for(lambda: all(log.named(AgentEnlisted, agent_id=a) for a in agent_ids), timeout_s=90)
            yield processes, worker, log
        finally:
            stop_swarm(processes.values(), worker)


async def latest_records(settings: Settings, topics: tuple[str, ...], agent_ids: list[str]) -> dict[str, object]:
    """The latest record of each topic that decodes to an event it carries (on the inbox: one addressed to one of
    `agent_ids`), read from the last 50 of each partition; topics without one are left out."""
    async with EventProducer(settings, client_id="fuzz") as producer:
        partitions = [
            TopicPartition(topic, p) for topic in topics for p in sorted(await producer.raw.partitions_for(topic))
        ]
    consumer = reader(settings, "fuzz-real", False)
    await consumer.start()
    try:
        ends = await consumer.end_offsets(partitions)
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, max(0, ends[tp] - 50))
        latest: dict[str, object] = {}
        pending = {tp for tp in partitions if ends[tp] > 0}
        while pending:
            for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                for record in records:
                    if _real(record, agent_ids) and (
                        tp.topic not in latest or record.timestamp >= latest[tp.topic].timestamp
                    ):
                        latest[tp.topic] = record
                if await consumer.position(tp) >= ends[tp]:
                    pending.discard(tp)
        return latest
    finally:
        await consumer.stop()


def _real(record, agent_ids: list[str]) -> bool:
    try:
        event = decode(record.value or b"")
    except Exception:
        return False
    if event.name not in TOPIC_EVENTS[record.topic] or isinstance(event, DeadLetterRecorded):
        return False
    return record.topic != INBOX or getattr(event, "agent_id", None) in agent_ids[:1]


async def fuzz(
    settings: Settings, real: dict[str, object], survivor: str
) -> tuple[dict[Coordinates, tuple[str, str | None]], list[Coordinates]]:
    """Every kind of garbage on every fuzzed topic, in the partition (and under the key) of its latest real record,
    or else of the survivor, but the alerts' garbage always in the other region's half; then a duplicate of that real
    record. The kind and owner at each garbage coordinate, and
    where the duplicates landed."""
    client, samples = Client(settings.bootstrap), _samples()
    garbage_at: dict[Coordinates, tuple[str, str | None]] = {}
    duplicates_at: list[Coordinates] = []
    missions = getattr(real.get("swarm.missions"), "partition", 0)
    for index, topic in enumerate(FUZZED):
        record = real.get(topic)
        sample = decode(record.value) if record is not None else samples[topic]
        key = record.key.decode() if record is not None and record.key else survivor
        partition = (
            missions ^ 1
            if topic == "swarm.alerts"  # always the other region's half (of an even count)
            else record.partition
            if record is not None
            else FIRST_SLOT
            if topic == INBOX
            else index % min(2, spec_for(settings, topic).partitions)
        )  # the survivor's slot
        wrong = (
            samples["swarm.usage"] if TokensUsed.name not in TOPIC_EVENTS[topic] else samples["swarm.agents.heartbeats"]
        )
        kinds = garbage(sample, wrong, seed=19)
        at = await client.send_records_async(topic, key, list(kinds.values()), partition)
        garbage_at |= {
            coordinates: (kind, DEAD_LETTERED_BY.get(topic)) for coordinates, kind in zip(at, kinds, strict=False)
        }
        if record is not None:
            duplicates_at += await client.send_records_async(topic, key, [record.value], record.partition)
    return garbage_at, duplicates_at


def _samples() -> dict[str, Event]:
    """A valid event of each fuzzed topic's kinds, to break: from the golden histories, else made here."""
    samples: dict[str, Event] = {}
    for path in sorted(HISTORIES.glob("*.hist")):
        for record in history.load(path).records:
            samples.setdefault(record.topic, decode(record.value))
    made = {
        "swarm.agents.heartbeats": stamp(
            AgentHeartbeat,
            producer="test",
            agent_id="fuzz",
            registration_id="r",
            sequence=0,
            status="IDLE",
            in_flight_task=None,
            region="region-0",
            slot=0,
        ),
        "swarm.memory.experiences": ExperienceRecorded(
            event_id=uuid.uuid4().hex,
            occurred_at=now_ms(),
            producer="test",
            experience_id="fuzz",
            agent_id="fuzz",
            node="n",
            kind="insight",
            content="x",
            embedding=[0.5],
            ttl_s=60,
        ),
        "swarm.groundtruth": stamp(GroundTruthUpdated, producer="test", document_id="fuzz", version=1, content="x"),
        "swarm.agents.inbox": task_assigned("fuzz", FIRST_SLOT, "x"),
        "swarm.agents.slots": stamp(SlotRequested, producer="test", agent_id="fuzz", region="region-0"),
    }
    for topic, event in made.items():
        samples.setdefault(topic, event)
    samples.setdefault(
        DEADLETTER,
        dead_letter(
            SimpleNamespace(topic="swarm.waits", partition=0, offset=0, key=None, value=b"x"), ValueError("x"), "fuzz"
        ),
    )
    return samples


async def _in_flight(log: Log, agent_id: str, mission_id: str, timeout_s: float = 20) -> None:
    """Return once the agent has started a task of the mission it has not finished (or after `timeout_s`)."""

    def working() -> bool:
        started = {e.task_id for e in log.named(TaskStarted, agent_id=agent_id, mission_id=mission_id)}
        ended = {e.task_id for e in log.named(TaskCompleted, TaskFailed, agent_id=agent_id)}
        return bool(started - ended)

    with contextlib.suppress(AssertionError):  # Log.wait_for's timeout
        await log.wait_for(working, timeout_s=timeout_s)


async def _eventually_named(log: Log, kind: type[E], **fields: object) -> list[E]:
    await log.wait_for(lambda: log.named(kind, **fields), timeout_s=30)
    return log.named(kind, **fields)


async def _completed(settings: Settings, mission_id: str) -> list[Event] | None:
    events = await journal(settings, "region-0", mission_id)
    return events if named(events, MissionCompleted) else None


def _letters(log: Log) -> dict[Coordinates, dict[str, DeadLetterRecorded]]:
    """The dead letters by the coordinates of the record they are about, each once by event id."""
    found: dict[Coordinates, dict[str, DeadLetterRecorded]] = collections.defaultdict(dict)
    for letter in log.named(DeadLetterRecorded):
        found[(letter.origin_topic, letter.origin_partition, letter.origin_offset)][letter.event_id] = letter
    return found


def _report(
    garbage_at: dict[Coordinates, tuple[str, str | None]],
    counts: dict[Coordinates, int],
    declared_ms: int,
    done: MissionCompleted,
    exited: dict[str, int],
) -> None:
    """The test's figures, printed (pytest -s shows them)."""
    per_topic: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for at, (_kind, owner) in garbage_at.items():
        per_topic[at[0]]["sent"] += 1
        per_topic[at[0]]["dead-lettered"] += counts[at]
        per_topic[at[0]][f"owner {owner}"] = 1
    for topic, figures in sorted(per_topic.items()):
        print(f"{topic}: {dict(figures)}")
    print(
        f"death declared {declared_ms} ms after the last heartbeat (timeout {LIVENESS_TIMEOUT_MS} ms); "
        f"mission {done.name} success={done.success} tasks={done.tasks_completed}; exited {exited}"
    )
