"""A lean agent simulator for the coordinator bench: many zero-latency agents behind one consumer and one producer.

Not the agent shell: no brain, store, heartbeats or recovery. Each simulated agent registers (AgentRegistered on the
registry, its own inbox slot), and on every TaskAssigned in its inbox writes TaskStarted then TaskCompleted (the real
event classes and codec) at once; it votes for the first candidate of every VoteRequested. One consumer reads all the simulated agents' inbox partitions and one producer
writes for all of them, so hundreds of agents cost the bench little and the coordinator is what is measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from asyncio import Future
from types import TracebackType
from typing import Any

from aiokafka import TopicPartition

from swarmlog import topics
from swarmlog.envelope import now_ms, stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import reader
from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentRegistered,
    TaskAssigned,
    TaskCompleted,
    TaskStarted,
    VoteCast,
    VoteRequested,
)
from swarmlog.settings import Settings

TOPIC_OF: dict[type[Event], str] = {
    AgentRegistered: topics.REGISTRY,
    TaskStarted: topics.TASK_EVENTS,
    TaskCompleted: topics.TASK_EVENTS,
    VoteCast: topics.VOTES,
}
"""Where a simulated agent's events go."""


class SimulatedAgents:
    """`count` zero-latency agents of one region on slots first_slot.., with one capability; `async with` runs them."""

    def __init__(self, settings: Settings, region: str, capability: str, count: int, first_slot: int) -> None:
        self.agent_ids = [f"{capability}-{n}" for n in range(count)]
        self.started: dict[tuple[str, str], int] = {}  # (mission, task) → its TaskStarted occurred_at
        self.redispatch_ms: list[int] = []  # an agent's TaskCompleted → its next TaskStarted (occurred_at), ms
        self._settings, self._region, self._capability = settings, region, capability
        self._slots = {agent_id: first_slot + n for n, agent_id in enumerate(self.agent_ids)}
        self._codec = codec_for(settings.schema_registry_url)
        self._seen: set[str] = set()  # TaskAssigned ids answered (a redelivered one is answered once)
        self._completed_at: dict[str, int] = {}
        self._changed = asyncio.Event()
        self._name = f"bench-simulator-{region}"

    async def __aenter__(self) -> SimulatedAgents:
        self._producer = EventProducer(self._settings, client_id=self._name)
        await self._producer.start()
        self._inbox = reader(self._settings, self._name, True, fetch_max_wait_ms=FETCH_MAX_WAIT_MS)
        await self._inbox.start()
        partitions = [TopicPartition(topics.INBOX, slot) for slot in self._slots.values()]
        self._inbox.assign(partitions)
        await self._inbox.seek_to_end(*partitions)
        for tp in partitions:
            await self._inbox.position(tp)  # fix "the end" before registering, so no assignment is missed
        await self._write([self._registered(agent_id) for agent_id in self.agent_ids])
        self.task = asyncio.create_task(self._answer(), name=self._name)  # what answers; done only on failure
        return self

    async def __aexit__(
        self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]
    ) -> None:
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)
        await self._inbox.stop()
        await self._producer.stop()

    async def wait_started(self, mission_id: str, tasks: int, timeout_s: float) -> dict[str, int]:
        """TaskStarted occurred_at per task of a mission, once `tasks` of them have started."""
        async with asyncio.timeout(timeout_s):
            while True:
                found = {task: at for (mission, task), at in self.started.items() if mission == mission_id}
                if len(found) >= tasks:
                    return found
                if self.task.done():
                    self.task.result()
                self._changed.clear()
                with contextlib.suppress(TimeoutError):  # wakes now and then to see whether answering failed
                    await asyncio.wait_for(self._changed.wait(), 1.0)

    def _registered(self, agent_id: str) -> AgentRegistered:
        return stamp(
            AgentRegistered,
            producer=self._name,
            agent_id=agent_id,
            capabilities=[self._capability],
            model="simulated",
            brain="scripted",
            node="bench",
            gpu=None,
            region=self._region,
            slot=self._slots[agent_id],
        )

    async def _answer(self) -> None:
        """Answer every TaskAssigned polled with TaskStarted and TaskCompleted, a poll's answers sent together."""
        while True:
            polled = await self._inbox.getmany(timeout_ms=100)
            answers: list[Event] = []
            for records in polled.values():
                for record in records:
                    event = self._codec.decode_record(record.value, record.topic, record.partition, record.offset)
                    if isinstance(event, TaskAssigned | VoteRequested) and event.event_id not in self._seen:
                        self._seen.add(event.event_id)
                        answers += self._run(event) if isinstance(event, TaskAssigned) else [self._vote(event)]
            if answers:
                await self._write(answers)
                self._changed.set()

    def _run(self, assigned: TaskAssigned) -> tuple[TaskStarted, TaskCompleted]:
        """What a zero-latency agent answers an assignment with."""
        attempt: dict[str, Any] = {
            "mission_id": assigned.mission_id,
            "task_id": assigned.task_id,
            "replica": assigned.replica,
            "attempt": assigned.attempt,
            "agent_id": assigned.agent_id,
        }
        at = now_ms()
        common: dict[str, Any] = {"producer": self._name, "correlation_id": assigned.mission_id, "occurred_at_ms": at}
        started = stamp(TaskStarted, causation_id=assigned.event_id, **common, **attempt, ground_truth_version=None)
        completed = stamp(
            TaskCompleted,
            event_id=uuid.uuid4().hex,
            causation_id=assigned.event_id,
            **common,
            **attempt,
            output="ok",
            confidence=1.0,
            steps=1,
            prompt_tokens=1,
            completion_tokens=1,
            latency_ms=0,
        )
        previous = self._completed_at.get(assigned.agent_id)
        if previous is not None:
            self.redispatch_ms.append(at - previous)
        self._completed_at[assigned.agent_id] = at
        self.started[assigned.mission_id, assigned.task_id] = at
        return started, completed

    def _vote(self, requested: VoteRequested) -> VoteCast:
        """What a simulated voter answers a ballot with: its first candidate."""
        return stamp(
            VoteCast,
            producer=self._name,
            correlation_id=requested.mission_id,
            causation_id=requested.event_id,
            mission_id=requested.mission_id,
            ballot_id=requested.ballot_id,
            voter_agent_id=requested.voter_agent_id,
            candidate_id=requested.candidates[0].candidate_id,
            confidence=1.0,
            reason=None,
        )

    async def _write(self, events: list[Event]) -> None:
        """Send the events (task events keyed by mission, registrations by agent, as agents key them), then await all."""
        sent: list[Future[Any]] = []
        for event in events:
            topic = TOPIC_OF[type(event)]
            key = event.agent_id if isinstance(event, AgentRegistered) else event.mission_id
            payload = self._producer.encode_for(topic, event)
            sent.append(await self._producer.raw.send(topic, payload, key=(key or "").encode()))
        await asyncio.gather(*sent)
