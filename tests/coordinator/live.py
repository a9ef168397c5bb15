"""Live-test helpers: scripted agents on a real broker, and the coordinator's journal as the tests read it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from aiokafka import TopicPartition

from swarmlog.coordinator.shell.recovery import write_of
from swarmlog.envelope import stamp
from swarmlog.errors import DecodeError
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import decode_record
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentRegistered,
    ConsensusSpec,
    MissionCompleted,
    MissionSubmitted,
    TaskAssigned,
    TaskCompleted,
    TaskResultRecorded,
    TaskSpec,
    TaskStarted,
    VoteCast,
    VoteRequested,
)
from swarmlog.settings import Settings
from swarmlog.topics import INBOX, JOURNAL, MISSIONS, REGISTRY, TASK_EVENTS, TOP_JOURNAL, VOTES

from .harness import E, attempt_of, named

Attempt = tuple[str, str, int, int]


@dataclasses.dataclass
class ScriptedAgent:
    """Registers, answers each TaskAssigned once per (task, replica, attempt) and votes for the first candidate.

    Its answer is `output`'s for the assignment, when given; else replica 0's is "<task> done" and any other replica's
    "<task> by <agent>", so replicas disagree."""

    settings: Settings
    agent_id: str
    slot: int
    region: str
    capabilities: list[str]
    latency_s: float = 0.05
    output: Callable[[TaskAssigned], str] | None = None
    runs: collections.Counter[Attempt] = dataclasses.field(default_factory=collections.Counter)
    duplicates: int = 0
    undecodable: int = 0

    async def run(self) -> None:
        """Fix the inbox position at its end (as a new `swarmlog agent` does), register, then serve until cancelled."""
        inbox = TopicPartition(INBOX, self.slot)
        consumer = reader(self.settings, self.agent_id, idempotence_supported(self.settings))  # no aborted writes
        await consumer.start()
        try:
            consumer.assign([inbox])
            consumer.seek(inbox, (await consumer.end_offsets([inbox]))[inbox])  # earlier tests' records stay unread
            async with EventProducer(self.settings, client_id=self.agent_id) as producer:
                await producer.send(
                    REGISTRY,
                    self._event(
                        AgentRegistered,
                        agent_id=self.agent_id,
                        capabilities=self.capabilities,
                        model="scripted",
                        brain="scripted",
                        node="test",
                        gpu=None,
                        region=self.region,
                        slot=self.slot,
                    ),
                    key=self.agent_id,
                )
                while True:
                    for record in (await consumer.getmany(timeout_ms=100)).get(inbox, []):
                        try:
                            event = decode_record(record.value, INBOX, self.slot, record.offset)
                        except DecodeError:
                            self.undecodable += 1  # a real agent dead-letters it; either way it goes on
                            continue
                        await self._handle(producer, event)
        finally:
            await consumer.stop()

    async def _handle(self, producer: EventProducer, event: Event) -> None:
        """Act on one inbox message addressed to this agent."""
        match event:
            case TaskAssigned(agent_id=self.agent_id):
                await self._run(producer, event)
            case VoteRequested(voter_agent_id=self.agent_id):
                await self._vote(producer, event)

    async def _run(self, producer: EventProducer, assigned: TaskAssigned) -> None:
        """Start and complete an attempt, unless it already ran here."""
        attempt: Attempt = (assigned.mission_id, assigned.task_id, assigned.replica, assigned.attempt)
        if attempt in self.runs:
            self.duplicates += 1
            return
        self.runs[attempt] += 1
        about = attempt_of(assigned)
        await producer.send(TASK_EVENTS, self._event(TaskStarted, **about), key=assigned.mission_id)
        await asyncio.sleep(self.latency_s)
        if self.output is not None:
            output = self.output(assigned)
        else:
            output = f"{assigned.task_id} by {self.agent_id}" if assigned.replica else f"{assigned.task_id} done"
        await producer.send(
            TASK_EVENTS,
            self._event(
                TaskCompleted,
                **about,
                output=output,
                steps=1,
                prompt_tokens=3,
                completion_tokens=2,
                latency_ms=int(self.latency_s * 1000),
            ),
            key=assigned.mission_id,
        )

    async def _vote(self, producer: EventProducer, request: VoteRequested) -> None:
        """Vote for the first candidate."""
        await producer.send(
            VOTES,
            self._event(
                VoteCast,
                mission_id=request.mission_id,
                ballot_id=request.ballot_id,
                voter_agent_id=self.agent_id,
                candidate_id=request.candidates[0].candidate_id,
                confidence=1.0,
                reason=None,
            ),
            key=request.mission_id,
        )

    def _event(self, kind: type[E], **fields: Any) -> E:
        """An event stamped by this agent."""
        return stamp(kind, producer=f"agent:{self.agent_id}", correlation_id=fields.get("mission_id"), **fields)


@contextlib.asynccontextmanager
async def serving(agents: Sequence[ScriptedAgent]) -> AsyncIterator[Sequence[ScriptedAgent]]:
    """The agents run while the block runs, and stop with it; an agent that died on its own fails the test."""
    tasks = [asyncio.create_task(agent.run()) for agent in agents]
    try:
        yield agents
    finally:
        died = [task.exception() for task in tasks if task.done() and not task.cancelled() and task.exception()]
        for running in tasks:
            running.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if died:
            raise AssertionError(f"{len(died)} scripted agent(s) died during the test: {died[0]!r}") from died[0]


@contextlib.asynccontextmanager
async def crew(
    settings: Settings,
    region: str,
    size: int,
    capability: str,
    first_slot: int,
    latency_s: float = 0.05,
    output: Callable[[TaskAssigned], str] | None = None,
) -> AsyncIterator[Sequence[ScriptedAgent]]:
    """Scripted agents of one region with a capability unique to the test (answering `output`'s answer when given),
    serving while the block runs."""
    async with serving(
        [
            ScriptedAgent(
                settings,
                f"{capability}-{index}",
                first_slot + index,
                region,
                [capability, "decision_making"],
                latency_s,
                output,
            )
            for index in range(size)
        ]
    ) as agents:
        yield agents


async def submit(settings: Settings, mission_id: str, region: str, tasks: list[dict[str, Any]]) -> None:
    """A client submits a mission to a region."""
    async with EventProducer(settings, client_id="test-client") as producer:
        await producer.send(
            MISSIONS,
            stamp(
                MissionSubmitted,
                producer="test",
                correlation_id=mission_id,
                mission_id=mission_id,
                title=mission_id,
                region=region,
                tasks=[msgspec.convert(spec, TaskSpec) for spec in tasks],
                consensus=ConsensusSpec("MAJORITY", 30_000, 0.5),
                submitted_by="test",
            ),
            key=mission_id,
        )


async def journal(settings: Settings, region: str, mission_id: str) -> list[Event]:
    """The events of one mission in its region's journal partition, committed ones only where there are transactions."""
    return [event for _, events in await journal_writes(settings, region, mission_id) for event in events]


async def journal_writes(settings: Settings, region: str, mission_id: str) -> list[tuple[str | None, list[Event]]]:
    """The events of one mission in its region's journal partition, in runs by the coordinator write (its header)."""
    tp = TopicPartition(JOURNAL, settings.region_names.index(region))
    consumer = reader(settings, "test-journal", idempotence_supported(settings))
    writes: list[tuple[str | None, list[Event]]] = []
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        async for record in records_to_end(consumer, tp):
            event = _decoded(record)
            if event is None or event.correlation_id != mission_id:
                continue
            write = write_of(record.headers)
            if not writes or writes[-1][0] != write:
                writes.append((write, []))
            writes[-1][1].append(event)
    finally:
        await consumer.stop()
    return writes


def _decoded(record: Any) -> Event | None:
    """A journal record's event, or None for one that does not decode (a test may have written garbage there)."""
    try:
        return decode_record(record.value, JOURNAL, record.partition, record.offset)
    except DecodeError:
        return None


def attempts(events: list[Event], kind: type[TaskAssigned | TaskResultRecorded]) -> collections.Counter[Attempt]:
    """How often each (mission, task, replica, attempt) appears in events of one kind (non-stale results only)."""
    return collections.Counter(
        (e.mission_id, e.task_id, e.replica, e.attempt)
        for e in named(events, kind)
        if not (isinstance(e, TaskResultRecorded) and e.stale)
    )


async def eventually(check: Callable[[], Awaitable[Any]], timeout_s: float = 45.0) -> Any:
    """The first truthy result of `check`, polled every 200 ms, or an AssertionError after timeout_s."""
    deadline = time.monotonic() + timeout_s
    while not (result := await check()):
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        await asyncio.sleep(0.2)
    return result


class Processes:
    """`swarmlog` child processes of one test, by name; whatever still runs at the end is killed."""

    def __init__(self, settings: Settings, logs: Path) -> None:
        self._env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
        self._logs = logs
        self.running: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str) -> None:
        """Start `swarmlog <args>`, logging to <logs>/<name>.log."""
        with (self._logs / f"{name}.log").open("ab") as log:
            self.running[name] = subprocess.Popen(
                [sys.executable, "-m", "swarmlog", *args], env=self._env, stdout=log, stderr=subprocess.STDOUT
            )

    def run(self, *args: str) -> str:
        """The output of `swarmlog <args>`, which must succeed."""
        done = subprocess.run(
            [sys.executable, "-m", "swarmlog", *args], env=self._env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def kill(self, name: str) -> None:
        """kill -9."""
        process = self.running.pop(name)
        process.send_signal(signal.SIGKILL)
        process.wait(10)

    def stop_all(self) -> None:
        for process in self.running.values():
            process.send_signal(signal.SIGTERM)
        for process in self.running.values():
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


async def top_journal(settings: Settings, mission_id: str) -> list[Event]:
    """The mission's events on the top's journal."""
    tp = TopicPartition(TOP_JOURNAL, 0)
    consumer = reader(settings, "test-top-journal", False)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        events = [decode_record(r.value, TOP_JOURNAL, 0, r.offset) async for r in records_to_end(consumer, tp)]
    finally:
        await consumer.stop()
    return [event for event in events if event.correlation_id == mission_id]


async def ended(settings: Settings, mission_id: str) -> list[Event] | None:
    """The mission's top-journal events once it has completed."""
    events = await top_journal(settings, mission_id)
    return events if named(events, MissionCompleted) else None
