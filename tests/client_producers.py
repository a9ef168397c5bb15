"""The producers of clients/ (Node, Java, kcat) as tests run them: how to start each, what it needs, and a region
with a coordinator and scripted agents for their missions. Shared by tests/test_producers.py (plaintext) and
tests/security/test_producers_secured.py (SASL_SSL and mutual TLS)."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from coordinator.live import crew, journal

from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import MissionCompleted
from swarmlog.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
REGION = "region-0"
SETUP_HINT = "run scripts/setup-clients.sh"


@dataclasses.dataclass(frozen=True)
class Producer:
    """One client of clients/: how to run it, what it needs, and the first inbox slot of its test agents."""

    name: str
    command: tuple[str, ...]
    tools: tuple[str, ...]
    files: tuple[str, ...]
    first_slot: int

    def missing(self) -> str | None:
        """Why this producer cannot run here, or None."""
        absent = [tool for tool in self.tools if shutil.which(tool) is None]
        absent += [path for path in self.files if not (ROOT / path).exists()]
        return f"{self.name} producer: missing {', '.join(absent)}; {SETUP_HINT}" if absent else None


PRODUCERS = (
    Producer("node", ("node", "clients/node/produce-mission.mjs"), ("node",), ("clients/node/node_modules",), 40),
    Producer(
        "java",
        ("java", "-jar", "clients/java/target/produce-mission.jar"),
        ("java",),
        ("clients/java/target/produce-mission.jar",),
        44,
    ),
    Producer(
        "kcat",
        ("bash", "clients/kcat/produce-mission.sh"),
        ("kcat", "jq", "xxd", "java"),
        (".cache/avro-tools/avro-tools-1.12.2.jar", ".cache/librdkafka/librdkafka.so.1"),
        48,
    ),
)


def _param(producer: Producer) -> Any:
    """The producer as a test parameter, skipped with what is missing where its toolchain is absent."""
    why = producer.missing()
    return pytest.param(producer, id=producer.name, marks=pytest.mark.skipif(why is not None, reason=why or ""))


EACH_PRODUCER = pytest.mark.parametrize("producer", [_param(producer) for producer in PRODUCERS])
"""Runs a test once per producer of clients/, given as `producer`."""


@contextlib.asynccontextmanager
async def region_0(settings: Settings, capability: str, first_slot: int, data_dir: Path) -> AsyncIterator[None]:
    """Two scripted agents with a capability unique to the test, and region-0's coordinator, while the block runs."""
    async with (
        crew(settings, REGION, 2, capability, first_slot),
        CoordinatorService(settings, REGION, data_dir=data_dir),
    ):
        yield


@dataclasses.dataclass(frozen=True)
class Run:
    """How a producer's run ended."""

    status: int
    stdout: str
    stderr: str


async def run(producer: Producer, settings: Settings, *args: str, env: Mapping[str, str] | None = None) -> Run:
    """Run the producer against the settings' bootstrap (without blocking the coordinator's event loop); `env` is
    added to this process's environment."""
    process = await asyncio.create_subprocess_exec(
        *producer.command,
        "--bootstrap",
        settings.bootstrap or "",
        *args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=120)
    assert process.returncode is not None
    return Run(process.returncode, out.decode(), err.decode())


async def produce(producer: Producer, settings: Settings, *args: str, env: Mapping[str, str] | None = None) -> str:
    """Run the producer; the mission id it prints."""
    done = await run(producer, settings, *args, env=env)
    assert done.status == 0, f"{producer.name} producer failed ({done.status}): {done.stderr}"
    return done.stdout.strip()


async def completed(settings: Settings, mission_id: str) -> list[Event] | None:
    """The mission's events in region-0's journal once it has completed."""
    events = await journal(settings, REGION, mission_id)
    return events if any(isinstance(event, MissionCompleted) for event in events) else None
