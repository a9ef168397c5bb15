"""A stop signal always ends a process, even when the broker it would say goodbye to has gone away."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from aiokafka import AIOKafkaConsumer

from swarmlog.kafka.admin import ensure_topics
from swarmlog.lifecycle import EXIT_STUCK
from swarmlog.schemas.codec import decode
from swarmlog.schemas.records import AgentRegistered
from swarmlog.services.tansu import run_tansu
from swarmlog.settings import Settings

AGENT_DEADLINE_S = 10.0 + 20.0  # the agent's drain time plus the grace for its goodbye


async def _registered(settings: Settings, agent_id: str) -> None:
    """Return once the agent's AgentRegistered is in the registry topic."""
    consumer = AIOKafkaConsumer(
        "swarm.agents.registry", bootstrap_servers=settings.bootstrap, auto_offset_reset="earliest"
    )
    async with consumer, asyncio.timeout(60):
        async for record in consumer:
            event = decode(record.value)
            if isinstance(event, AgentRegistered) and event.agent_id == agent_id:
                return


def test_an_agent_whose_broker_vanished_still_exits_after_sigterm(tmp_path: Path) -> None:
    with run_tansu() as broker:
        settings = dataclasses.replace(Settings.from_env(), broker="tansu", bootstrap=broker.bootstrap)
        asyncio.run(ensure_topics(settings))
        env = os.environ | {"SWARMLOG_BROKER": "tansu", "SWARMLOG_BOOTSTRAP": broker.bootstrap}
        log = (tmp_path / "agent.log").open("wb")
        agent = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "swarmlog",
                "agent",
                "lonely",
                *("--slot", "0", "--brain", "scripted"),
                "--data-dir",
                str(tmp_path),
            ],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            asyncio.run(_registered(settings, "lonely"))
        except BaseException:
            agent.kill()
            raise
    # The broker is gone now: the clean stop cannot deregister, so the deadline must end it.
    sent = time.monotonic()
    agent.send_signal(signal.SIGTERM)
    try:
        code = agent.wait(AGENT_DEADLINE_S + 15)
    finally:
        agent.kill()
    assert code in (0, EXIT_STUCK), (tmp_path / "agent.log").read_text()[-2000:]
    assert time.monotonic() - sent < AGENT_DEADLINE_S + 15


SLOW_TO_LOAD = """
import importlib.abc, importlib.machinery, sys, time

class Finalized:
    \"\"\"Takes 3 s to finalize: a signal that lands in a finalizer cannot raise out of it.\"\"\"

    def __del__(self):
        time.sleep(3)

class SlowCommands(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    \"\"\"Loads swarmlog.cli as slowly as a busy machine can: says so, then spends 3 s in a finalizer.\"\"\"

    def find_spec(self, name, path, target=None):
        return importlib.machinery.ModuleSpec(name, self) if name == "swarmlog.cli" else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        print("loading", flush=True)
        Finalized()
        module.app = lambda: print("the command ran", flush=True)

sys.meta_path.insert(0, SlowCommands())
from swarmlog.launch import main
main()
"""


def test_a_sigterm_while_the_commands_still_load_is_a_clean_stop() -> None:
    """Also where the signal lands in a finalizer, where an exception raised by the handler would be swallowed."""
    process = subprocess.Popen([sys.executable, "-c", SLOW_TO_LOAD], stdout=subprocess.PIPE)
    try:
        assert process.stdout is not None and process.stdout.readline() == b"loading\n"
        process.send_signal(signal.SIGTERM)
        code = process.wait(10)
        rest = process.stdout.read()
    finally:
        process.kill()
    assert code == 0
    assert b"the command ran" not in rest
