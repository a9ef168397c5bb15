"""A task assigned to an agent that never starts it (alive, registered, deaf to its inbox) is taken back on time."""

from __future__ import annotations

import uuid
from pathlib import Path

from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.envelope import stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentEnlisted,
    AgentRegistered,
    MissionCompleted,
    TaskAssigned,
    TaskCancelled,
    TaskReassigned,
    TaskResultRecorded,
    TaskStartRecorded,
)
from swarmlog.settings import Settings
from swarmlog.topics import REGISTRY

from .harness import task
from .live import attempts, crew, eventually, journal, named, submit

START_TIMEOUT_MS = 1_500


async def test_a_task_its_agent_never_starts_is_cancelled_and_completed_by_another(settings: Settings, tmp_path: Path):
    capability = f"deaf-{uuid.uuid4().hex[:8]}"
    deaf, mission_id = f"{capability}-deaf", f"m-{capability}"
    async with CoordinatorService(settings, "region-0", data_dir=tmp_path, start_timeout_ms=START_TIMEOUT_MS):
        async with EventProducer(settings, client_id=deaf) as producer:  # it registers, then never reads its inbox
            await producer.send(
                REGISTRY,
                stamp(
                    AgentRegistered,
                    producer=f"agent:{deaf}",
                    agent_id=deaf,
                    capabilities=[capability],
                    model="scripted",
                    brain="scripted",
                    node="test",
                    gpu=None,
                    region="region-0",
                    slot=40,
                ),
                key=deaf,
            )
        await eventually(lambda: _journaled(settings, AgentEnlisted, agent_id=deaf))
        await submit(settings, mission_id, "region-0", [task("t", capability)])
        [first] = await eventually(lambda: _assigned(settings, mission_id))
        assert first.agent_id == deaf
        async with crew(settings, "region-0", 1, capability, first_slot=41) as agents:
            events = await eventually(lambda: _completed(settings, mission_id))
    [cancelled] = named(events, TaskCancelled)
    [reassigned] = named(events, TaskReassigned)
    assert (cancelled.agent_id, reassigned.from_agent_id) == (deaf, deaf)
    assert f"not started within {START_TIMEOUT_MS} ms" in reassigned.reason
    assert reassigned.occurred_at - first.occurred_at >= START_TIMEOUT_MS
    [recorded] = named(events, TaskResultRecorded)
    assert (recorded.agent_id, recorded.attempt) == (agents[0].agent_id, 2)
    assert [event.agent_id for event in named(events, TaskStartRecorded)] == [agents[0].agent_id]
    assert set(attempts(events, TaskAssigned).values()) == {1}


async def _journaled(settings: Settings, kind: type[Event], **fields: object) -> bool:
    events = await journal(settings, "region-0", None)  # type: ignore[arg-type]  # events of no mission
    return any(isinstance(event, kind) and all(getattr(event, k) == v for k, v in fields.items()) for event in events)


async def _assigned(settings: Settings, mission_id: str) -> list | None:
    return named(await journal(settings, "region-0", mission_id), TaskAssigned) or None


async def _completed(settings: Settings, mission_id: str) -> list | None:
    events = await journal(settings, "region-0", mission_id)
    return events if named(events, MissionCompleted) else None
