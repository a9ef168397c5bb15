"""Garbage in a region's journal: the coordinator refuses to start and names the record and the repair command;
status reports it and goes on; the repair records the skip (and refuses a record that decodes); the coordinator
starts again, skips exactly that record, and a mission completes. Real `swarmlog` processes on a real broker."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer

from swarmlog.coordinator.shell.recovery import JOURNAL
from swarmlog.coordinator.shell.repair import repair
from swarmlog.schemas.records import MissionCompleted
from swarmlog.settings import Settings

from .harness import task
from .live import crew, eventually, named, submit
from .test_shell import completed

pytestmark = pytest.mark.slow
REGION, PARTITION, FIRST_SLOT = "region-3", 3, 56  # other tests use region-3 too: the test always leaves it repaired
GARBAGE = b"\xc3\x01\x00\x01\x02\x03\x04\x05\x06\x07 not an event"


def swarmlog(settings: Settings, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """Run `python -m swarmlog ARGS` against the test's broker."""
    env = {
        **os.environ,
        "SWARMLOG_BROKER": settings.broker,
        "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
        "COLUMNS": "400",
    }
    return subprocess.run(
        [sys.executable, "-m", "swarmlog", *args], env=env, capture_output=True, text=True, timeout=timeout_s
    )


async def write_garbage(settings: Settings) -> int:
    """Anyone who can write to the cluster: raw bytes on the region's journal partition; their offset."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        return (await producer.send_and_wait(JOURNAL, GARBAGE, key=REGION.encode(), partition=PARTITION)).offset
    finally:
        await producer.stop()


async def test_garbage_in_the_journal_stops_the_region_until_an_audited_repair_then_a_mission_completes(
    settings: Settings, tmp_path: Path
):
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"repair-{uuid.uuid4().hex[:8]}"
    coordinator = ["coordinator", "--region", REGION, "--data-dir", str(tmp_path / "coordinator")]
    bad = await write_garbage(settings)
    repaired = False
    try:
        # The coordinator will not guess: exit 1, the record's coordinates and the exact way out.
        refused = await asyncio.to_thread(swarmlog, settings, *coordinator)
        assert refused.returncode == 1, refused.stderr
        message = " ".join(refused.stderr.split())
        assert f"{JOURNAL}[{PARTITION}]@{bad}" in message and "will not guess" in message, message
        [command] = re.findall(r"swarmlog coordinator repair [^;]*", message)
        assert f"--region {REGION} --skip {bad} --reason" in command

        # status reports the record for its region and still reports every region.
        shown = await asyncio.to_thread(swarmlog, settings, "status", "--json")
        assert shown.returncode == 0, shown.stderr
        regions = json.loads(shown.stdout)["regions"]
        assert set(regions) == set(settings.region_names)
        assert [record["offset"] for record in regions[REGION]["undecodable"]] == [bad]

        # The repair the coordinator named, with a reason, recorded in the journal.
        arguments = shlex.split(command.replace("'<why they are garbage>'", "'garbage written by a test'"))[1:]
        done = await asyncio.to_thread(swarmlog, settings, *arguments, "--operator", "test-operator")
        assert done.returncode == 0, done.stderr
        repaired = True
        said = " ".join(done.stdout.split())
        assert f"offsets {bad} are passed over" in said, said
        [written] = re.findall(rf"JournalRecordsSkipped at {re.escape(JOURNAL)}\[{PARTITION}\]@(\d+)", said)

        # A record that decodes (the repair itself, here) is never skipped: refused, nothing written. Skipping the
        # garbage again writes nothing either.
        denied = await asyncio.to_thread(
            swarmlog,
            settings,
            "coordinator",
            "repair",
            "--region",
            REGION,
            "--skip",
            written,
            "--skip",
            str(bad),
            "--reason",
            "wrong offset",
        )
        assert denied.returncode == 1, denied.stderr
        assert f"@{written} decodes as JournalRecordsSkipped" in " ".join(denied.stderr.split()), denied.stderr
        again = await asyncio.to_thread(swarmlog, settings, *arguments)
        assert again.returncode == 0 and "already skipped" in again.stdout, again.stdout
        shown = json.loads((await asyncio.to_thread(swarmlog, settings, "status", "--json")).stdout)
        assert (shown["regions"][REGION]["undecodable"], shown["regions"][REGION]["skipped"]) == ([], 1)

        # The region resumes: the coordinator starts, skips exactly that record, and a mission completes.
        async with crew(settings, REGION, 2, capability, first_slot=FIRST_SLOT, latency_s=0.05):
            env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
            process = subprocess.Popen([sys.executable, "-m", "swarmlog", *coordinator], env=env)
            try:
                await submit(settings, mission_id, REGION, [task("t0", capability), task("t1", capability)])
                events = await eventually(lambda: completed(settings, REGION, mission_id), timeout_s=90)
            finally:
                process.send_signal(signal.SIGTERM)
                assert await asyncio.to_thread(process.wait, 30) == 0
        [end] = named(events, MissionCompleted)
        assert end.success and end.tasks_completed == 2
    finally:
        if not repaired:  # leave the region usable for the rest of the session
            await repair(settings, REGION, [bad], "cleanup after a failed test", "tests")
