"""Runs `swarmlog agent` as a subprocess on a test broker, writes into its inbox, and reads what it wrote."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import BudgetExceeded, BudgetRestored, DrainRequested, ResyncRequested, from_fields
from swarmlog.settings import Settings
from swarmlog.topics import CONTROL, INBOX


def slot_of(settings: Settings, agent_id: str) -> int:
    """The agent's default inbox slot, as `swarmlog agent` picks it."""
    return zlib.crc32(agent_id.encode()) % settings.inbox_partitions


def start_agent(
    settings: Settings, agent_id: str, slot: int, data_dir: Path, *extra: str, env: Mapping[str, str] | None = None
) -> subprocess.Popen:
    """`python -m swarmlog agent` on the settings' broker (with `env` added), its log in data_dir/<id>.log."""
    env = os.environ | {"SWARMLOG_BOOTSTRAP": settings.bootstrap, "SWARMLOG_BROKER": settings.broker} | dict(env or {})
    log = open(data_dir / f"{agent_id}.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        [sys.executable, "-m", "swarmlog", "agent", agent_id, "--slot", str(slot), "--data-dir", str(data_dir), *extra],
        env=env,
        stdout=log,
        stderr=log,
    )


def spawner(
    settings: Settings, agent_id: str, slot: int, data_dir: Path, default: tuple[str, ...] = ()
) -> Iterator[Callable[..., subprocess.Popen]]:
    """A `start(*extra)` that starts the agent (again, after a stop or a kill) with `extra`, else `default`; whatever
    still runs at the end is killed. For a fixture to yield from."""
    processes: list[subprocess.Popen] = []

    def start(*extra: str) -> subprocess.Popen:
        processes.append(start_agent(settings, agent_id, slot, data_dir, *(extra or default)))
        return processes[-1]

    yield start
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(10)


def stop_agent(process: subprocess.Popen, sig: int = signal.SIGTERM, timeout_s: float = 30) -> int:
    """Signal the agent and wait for it to exit."""
    process.send_signal(sig)
    return process.wait(timeout_s)


def task_assigned(
    agent_id: str,
    slot: int,
    prompt: str,
    *,
    mission_id: str | None = None,
    max_steps: int = 2,
    task_id: str = "t1",
    max_tokens: int | None = None,
) -> Event:
    """A TaskAssigned as the coordinator would write it."""
    mission_id = mission_id or uuid.uuid4().hex
    return from_fields(
        "TaskAssigned",
        {
            "event_id": uuid.uuid4().hex,
            "occurred_at": int(time.time() * 1000),
            "correlation_id": mission_id,
            "causation_id": None,
            "producer": "coordinator:region-0",
            "mission_id": mission_id,
            "task_id": task_id,
            "replica": 0,
            "attempt": 1,
            "kind": "WORK",
            "agent_id": agent_id,
            "slot": slot,
            "score": 1.0,
            "prompt": prompt,
            "inputs": {},
            "required_capabilities": [],
            "max_steps": max_steps,
            "max_tokens": max_tokens,
        },
    )


async def send_inbox(
    settings: Settings, slot: int, *events: Event, raw: bytes | None = None, key: str | None = None
) -> int | None:
    """Write events (or raw bytes first) into one inbox partition, keyed by `key` or else by their agent; the raw
    record's offset, if one was written (a slot may hold other tests' records before it)."""
    offset = None
    async with EventProducer(settings, client_id="test-coordinator") as producer:
        if raw is not None:
            key_bytes = None if key is None else key.encode()
            offset = (await producer.raw.send_and_wait(INBOX, raw, partition=slot, key=key_bytes)).offset
        for event in events:
            await producer.send(INBOX, event, key=key or event.agent_id, partition=slot)
    return offset


async def publish_control(settings: Settings, *events: Event, raw: bytes | None = None, key: str | None = None) -> None:
    """Write events (or raw bytes) to swarm.control, keyed by `key` or else by their agent or target."""
    async with EventProducer(settings, client_id="test-operator") as producer:
        if raw is not None:
            await producer.raw.send_and_wait(CONTROL, raw, key=None if key is None else key.encode())
        for event in events:
            await producer.send(CONTROL, event, key=key or addressee(event))


def addressee(event: Event) -> str:
    """Whom a control event is for: an agent's id, or "*" for every agent."""
    match event:
        case BudgetExceeded() | BudgetRestored():
            return event.agent_id
        case DrainRequested() | ResyncRequested():
            return event.target
        case _:
            raise ValueError(f"{event.name} is not a control event")


class Log(Collector):
    """Everything on some topics since the beginning, decoded, collected in the background."""

    async def wait_for(self, done: Callable[[], object], timeout_s: float = 60) -> None:
        """Wait until done() is truthy; AssertionError listing what arrived otherwise."""
        try:
            await super().wait_for(done, timeout_s)
        except TimeoutError:
            raise AssertionError(f"timed out; saw {[e.name for e in self.events][-30:]}") from None
