"""Signing on: every process of a region signs what it writes and verifies what it reads; a mission completes, and a
record naming an agent or a coordinator that its signer may not claim (or not signed at all) is dead-lettered by its
topic's consumer (the streams worker, the coordinator, the addressed agent) with the reason and changes nothing."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path

import pytest

from swarmlog.envelope import stamp
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.signing import generate
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDelisted,
    AgentDeregistered,
    AgentHeartbeat,
    DeadLetterRecorded,
    TaskAssigned,
    TaskCompleted,
    TaskResultRecorded,
    TaskStarted,
)
from swarmlog.settings import Settings
from swarmlog.topics import DEAD_LETTERS, HEARTBEATS, INBOX, REGISTRY, TASK_EVENTS

from .mission import REGION, crew, results_once

pytestmark = [pytest.mark.slow, pytest.mark.timeout(400)]
TASKS = 6
FIRST_SLOT = 40


def trust_file(tmp_path: Path) -> Path:
    """Keys for the coordinator, the streams worker, the crew's agents (any `faults-*` id) and a rogue agent
    principal (only `rogue-*`), under tmp_path/keys, and the trust file listing them all."""
    entries = [
        generate(name, role, claims, tmp_path / "keys")[1]
        for name, role, claims in (
            ("coordinator-0", "coordinator", [REGION]),
            ("streams", "streams", []),
            ("agent-pool", "agent", ["faults-*"]),
            ("agent-rogue", "agent", ["rogue-*"]),
        )
    ]
    path = tmp_path / "trust.toml"
    path.write_text("\n".join(entries))
    return path


def signing_env(tmp_path: Path, trust: Path, name: str) -> dict[str, str]:
    """The signing settings of the crew's process `name`: its principal's key, and the trust file."""
    principal = {"coordinator": "coordinator-0", "streams": "streams"}.get(name, "agent-pool")
    return {
        "SWARMLOG_SIGNING_TRUST_FILE": str(trust),
        "SWARMLOG_SIGNING_KEY_FILE": str(tmp_path / "keys" / f"{principal}.pem"),
        "SWARMLOG_SIGNING_PRINCIPAL": principal,
    }


async def write(
    settings: Settings, topic: str, event: Event, key: str, partition: int | None = None
) -> tuple[int, int]:
    """Write `event` as `settings` sign it (or unsigned); its partition and offset."""
    async with EventProducer(settings, client_id="test-forger") as producer:
        value, encoded = producer.encode_for(topic, event), key.encode()
        headers = producer.headers_for(topic, encoded, value)
        meta = await producer.raw.send_and_wait(topic, value, key=encoded, partition=partition, headers=headers)
    return meta.partition, meta.offset


async def test_a_signed_mission_completes_and_forged_claims_are_dead_lettered(
    own_settings: Settings, redis_url: str, tmp_path: Path
):
    # A broker of its own: with signing on, every reader refuses the unsigned records earlier tests left on the
    # session's broker, and their dead letters would be in the way of the tests after this one.
    settings = dataclasses.replace(own_settings, redis_url=redis_url)
    trust = trust_file(tmp_path)
    rogue = dataclasses.replace(
        settings,
        signing_key_file=tmp_path / "keys" / "agent-rogue.pem",
        signing_principal="agent-rogue",
        signing_trust_file=trust,
    )
    async with (
        crew(
            settings, tmp_path, agents=2, first_slot=FIRST_SLOT, env_of=lambda name: signing_env(tmp_path, trust, name)
        ) as running,
        Collector(settings, DEAD_LETTERS) as letters,
    ):
        victim = f"{running.capability}-0"
        as_victim = {"producer": f"agent:{victim}", "agent_id": victim}
        forged = {
            "over-claim": await write(
                rogue, REGISTRY, stamp(AgentDeregistered, **as_victim, reason="forged: leaving"), victim
            ),
            "unsigned": await write(
                settings,
                HEARTBEATS,
                stamp(
                    AgentHeartbeat,
                    **as_victim,
                    registration_id="forged",
                    sequence=1,
                    status="BUSY",
                    region=REGION,
                    slot=0,
                ),
                victim,
            ),
        }
        result = stamp(
            TaskCompleted,
            **as_victim,
            mission_id=f"m-{uuid.uuid4().hex[:8]}",
            task_id="t0",
            replica=0,
            attempt=1,
            output="forged",
            steps=1,
            latency_ms=1,
        )
        forged["over-claim by another agent"] = await write(rogue, TASK_EVENTS, result, result.mission_id)
        order = stamp(  # an agent principal writing as the coordinator, to the victim's inbox slot
            TaskAssigned,
            producer=f"coordinator:{REGION}",
            mission_id=f"m-{uuid.uuid4().hex[:8]}",
            task_id="t0",
            replica=0,
            attempt=1,
            agent_id=victim,
            slot=FIRST_SLOT,
            score=1.0,
            prompt="forged",
        )
        forged["agent as coordinator"] = await write(rogue, INBOX, order, victim, partition=FIRST_SLOT)
        where = {
            (REGISTRY, *forged["over-claim"]): ("streams", "over-claim"),
            (HEARTBEATS, *forged["unsigned"]): ("streams", "unsigned"),
            (TASK_EVENTS, *forged["over-claim by another agent"]): ("coordinator", "over-claim"),
            (INBOX, *forged["agent as coordinator"]): (f"agent:{victim}", "over-claim"),
        }

        def dead_letters() -> dict[tuple[str, int, int], DeadLetterRecorded]:
            return {
                (letter.origin_topic, letter.origin_partition, letter.origin_offset): letter
                for letter in letters.named(DeadLetterRecorded)
                if (letter.origin_topic, letter.origin_partition, letter.origin_offset) in where
            }

        await letters.wait_for(lambda: len(dead_letters()) == len(where), timeout_s=60)
        for origin, letter in dead_letters().items():
            consumer, kind = where[origin]
            assert letter.error_type == "SignatureRejected" and consumer in letter.consumer, letter
            assert f"refused: {kind}: " in letter.reason, letter.reason
        journaled = await running.run_mission(TASKS, fault=noop, after_results=0)
        results_once(journaled, TASKS)
        assert not running.log.named(AgentDelisted, agent_id=victim), "a forged deregistration delisted the agent"
        assert not running.log.named(TaskResultRecorded, mission_id=result.mission_id)
        assert not running.log.named(TaskStarted, mission_id=order.mission_id), "the forged assignment ran"
        assert not running.dead()


async def noop(mission_id: str) -> None:
    """No fault: the mission runs undisturbed."""
