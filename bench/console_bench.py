"""The console at scale (issue #16): 2,000 agents heartbeating at 1 Hz and 100 live missions, in headless Chromium.

Starts a broker (Apache Kafka by default, or Tansu) and writes a synthetic swarm as the processes would write it:
2,000 AgentRegistered over 4 regions and a heartbeat of each agent every second (BUSY with its task while it holds
one), and 100 missions kept live: each is submitted and accepted with 4 tasks, then advances one journal step a
second or so (TaskAssigned, TaskStarted by its agent, TaskStartRecorded, TaskResultRecorded, per task; then
MissionCompleted), and an ended one is replaced by a new one. `swarmlog console` reads it, and Debian's headless
Chromium shows each page while the load runs. Measured:
- each page update in the browser (the page's own `consoleTimings`: parse the section, draw it, and the layout that
  forces), p50 / p95 / max per page over MEASURE_S: Swarm (2,000 rows, sent every second at least), Missions, one
  mission's timeline; target: every update under 200 ms;
- commit → on the page: a MissionSubmitted written (acknowledged) → its row in the Missions page's DOM, polled every
  10 ms; the page's target is 1 s;
- the Swarm section's size on the wire, and the console process's CPU share while the pages are shown.
Run: .venv/bin/python bench/console_bench.py [--broker kafka|tansu] [--agents 2000] [--missions 100]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from swarmlog.envelope import stamp
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentHeartbeat,
    AgentRegistered,
    MissionAccepted,
    MissionCompleted,
    MissionSubmitted,
    TaskAssigned,
    TaskResultRecorded,
    TaskSpec,
    TaskStarted,
    TaskStartRecorded,
)
from swarmlog.services import open_broker
from swarmlog.settings import Settings
from swarmlog.topics import HEARTBEATS, JOURNAL, MISSIONS, REGISTRY, TASK_EVENTS

REGIONS = 4
TASKS = 4
STEPS = 2 + 4 * TASKS  # a mission's journal and task events, one a second
WARM_S = 8.0
MEASURE_S = 10.0
PROBES = 10
TARGET_MS = 200.0
out = Console()


@dataclasses.dataclass
class Swarm:
    """The synthetic swarm's state: registrations, heartbeat sequences, who holds which task, and the live missions'
    next steps."""

    agents: list[AgentRegistered]
    holding: dict[str, str] = dataclasses.field(default_factory=dict)
    sequence: itertools.count[int] = dataclasses.field(default_factory=itertools.count)
    missions: dict[str, Iterator[tuple[str, int | None, Event] | None]] = dataclasses.field(default_factory=dict)
    made: itertools.count[int] = dataclasses.field(default_factory=itertools.count)


def registrations(count: int) -> list[AgentRegistered]:
    """AgentRegistered of `count` agents over REGIONS regions."""
    return [
        stamp(
            AgentRegistered,
            producer=f"agent:agent-{n}",
            agent_id=f"agent-{n}",
            capabilities=["coding", "review"],
            model="scripted",
            brain="scripted",
            node=f"node-{n // 8}",
            gpu=n % 8,
            region=f"region-{n % REGIONS}",
            slot=n // REGIONS,
        )
        for n in range(count)
    ]


def mission_steps(swarm: Swarm, mission_id: str) -> Iterator[tuple[str, int | None, Event] | None]:
    """(topic, partition, event) of one mission from its submission to its end, its agents' holdings kept."""
    region_index = hash(mission_id) % REGIONS
    region = f"region-{region_index}"

    def journal(kind: type[Any], **fields: Any) -> tuple[str, int | None, Event]:
        event = stamp(
            kind, producer=f"coordinator:{region}", correlation_id=mission_id, mission_id=mission_id, **fields
        )
        return JOURNAL, region_index, event

    for _ in range(random.randrange(STEPS)):  # missions started together would move in step
        yield None
    tasks = [TaskSpec(f"t{n}", "do it", ["coding"], [], 1) for n in range(TASKS)]
    yield MISSIONS, None, stamp(MissionSubmitted, producer="client:bench", correlation_id=mission_id,
                                mission_id=mission_id, title=f"bench {mission_id}", region=region,
                                tasks=tasks)  # fmt: skip
    yield journal(MissionAccepted, region=region, title=f"bench {mission_id}", submitted_at=int(time.time() * 1000),
                  tasks=tasks)  # fmt: skip
    candidates = [agent for agent in swarm.agents if agent.region == region]
    for spec in tasks:
        agent = candidates[hash((mission_id, spec.task_id)) % len(candidates)].agent_id
        about = {"task_id": spec.task_id, "replica": 0, "attempt": 1, "agent_id": agent}
        yield journal(TaskAssigned, slot=0, score=1.0, prompt="do it", **about)
        swarm.holding[agent] = f"{mission_id}/{spec.task_id}"
        started = stamp(
            TaskStarted, producer=f"agent:{agent}", correlation_id=mission_id, mission_id=mission_id, **about
        )
        yield TASK_EVENTS, None, started
        yield journal(TaskStartRecorded, **about)
        swarm.holding.pop(agent, None)
        yield journal(TaskResultRecorded, succeeded=True, tokens=40, latency_ms=900, **about)
    yield journal(MissionCompleted, success=True, latency_ms=TASKS * 3000, agent_count=TASKS, tasks_completed=TASKS,
                  tasks_failed=0, outputs=["done"], tokens_used=TASKS * 40)  # fmt: skip


async def load(producer: EventProducer, swarm: Swarm, missions: int, stop: asyncio.Event) -> None:
    """Heartbeats of every agent and one step of every live mission each second, until `stop`."""
    raw = producer.raw
    for agent in swarm.agents:
        await raw.send(REGISTRY, producer.encode_for(REGISTRY, agent), key=agent.agent_id.encode())
    while not stop.is_set():
        began = time.monotonic()
        while len(swarm.missions) < missions:
            mission_id = f"bench-{next(swarm.made)}"
            swarm.missions[mission_id] = mission_steps(swarm, mission_id)
        sequence = next(swarm.sequence)
        sends = []
        for agent in swarm.agents:
            task = swarm.holding.get(agent.agent_id)
            beat = stamp(
                AgentHeartbeat, producer=f"agent:{agent.agent_id}", agent_id=agent.agent_id,
                registration_id=agent.event_id, sequence=sequence, status="BUSY" if task else "IDLE",
                region=agent.region, slot=agent.slot, in_flight_task=task,
            )  # fmt: skip
            sends.append(await raw.send(HEARTBEATS, producer.encode_for(HEARTBEATS, beat), key=agent.agent_id.encode()))
        for mission_id, steps in list(swarm.missions.items()):
            step = next(steps, False)
            if step is False:
                del swarm.missions[mission_id]
                continue
            if step is None:
                continue
            topic, partition, event = step
            key = None if partition is not None else mission_id.encode()
            sends.append(await raw.send(topic, producer.encode_for(topic, event), key=key, partition=partition))
        await asyncio.gather(*sends)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), max(0.0, 1.0 - (time.monotonic() - began)))


@contextlib.contextmanager
def console(settings: Settings, folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`swarmlog console` on a free port, once it shows the log live."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
           "SWARMLOG_REGIONS": str(REGIONS)}  # fmt: skip
    env.pop("SWARMLOG_CONSOLE_TOKEN", None)
    with (folder / "console.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "swarmlog", "console", "--port", str(port)], env=env, stdout=log, stderr=log
        )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError, ValueError):
                if get(f"{url}/api/status")["state"] == "live":
                    break
            if time.monotonic() > deadline or process.poll() is not None:
                sys.exit(f"the console did not come up:\n{(folder / 'console.log').read_text()[-3000:]}")
            time.sleep(0.2)
        yield url, process
    finally:
        process.terminate()
        process.wait(15)


def get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)


async def measure(driver: webdriver.Chrome, url: str, address: str, section: str) -> list[float]:
    """The page's update times of `section` over MEASURE_S, after it has drawn once."""
    await asyncio.to_thread(driver.get, f"{url}/{address}")
    await asyncio.sleep(2.0)
    await asyncio.to_thread(
        driver.execute_script, "for (const k in window.consoleTimings) consoleTimings[k].length = 0"
    )
    await asyncio.sleep(MEASURE_S)
    found: list[float] = await asyncio.to_thread(
        driver.execute_script, "return (window.consoleTimings[arguments[0]] || []).slice()", section
    )
    return found


async def probe(driver: webdriver.Chrome, producer: EventProducer, n: int) -> float:
    """Seconds from a MissionSubmitted's acknowledgement to its row in the Missions page."""
    mission_id = f"probe-{n}-{time.monotonic_ns()}"
    event = stamp(MissionSubmitted, producer="client:bench", correlation_id=mission_id, mission_id=mission_id,
                  title="probe", region="region-0", tasks=[TaskSpec("t", "do it", ["coding"], [], 1)])  # fmt: skip
    await producer.send(MISSIONS, event, key=mission_id)
    sent = time.monotonic()
    script = 'return document.querySelector(`tr[data-mission="${arguments[0]}"]`) !== null'
    while not await asyncio.to_thread(driver.execute_script, script, mission_id):
        if time.monotonic() - sent > 10:
            return float("inf")
        await asyncio.sleep(0.01)
    return time.monotonic() - sent


def stats(values: list[float]) -> tuple[str, str, str, str]:
    if not values:
        return ("0", "-", "-", "-")
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
    return (str(len(values)), f"{statistics.median(ordered):.1f}", f"{p95:.1f}", f"{ordered[-1]:.1f}")


async def run(settings: Settings, agents: int, missions: int, folder: Path) -> None:
    await ensure_topics(settings)
    swarm = Swarm(registrations(agents))
    stop = asyncio.Event()
    async with EventProducer(settings, client_id="console-bench", linger_ms=5) as producer:
        loading = asyncio.create_task(load(producer, swarm, missions, stop))
        await asyncio.sleep(WARM_S)
        if loading.done():
            loading.result()  # the load failed: say why
        with console(settings, folder) as (url, process):
            driver = await asyncio.to_thread(browser)
            try:
                await asyncio.sleep(WARM_S)
                swarm_bytes = len(json.dumps(get(f"{url}/api/swarm")))
                cpu_before, wall_before = cpu_s(process.pid), time.monotonic()
                pages = {"Swarm": await measure(driver, url, "#/swarm", "swarm")}
                pages["Missions"] = await measure(driver, url, "#/missions", "missions")
                running = next(m["mission_id"] for m in get(f"{url}/api/missions") if not m["ended"])
                pages["a mission"] = await measure(driver, url, f"#/mission/{running}", "mission")
                cpu = (cpu_s(process.pid) - cpu_before) / (time.monotonic() - wall_before)
                await asyncio.to_thread(driver.get, f"{url}/#/missions")
                await asyncio.sleep(2.0)
                latencies = [await probe(driver, producer, n) for n in range(PROBES)]
                shown = get(f"{url}/api/swarm")
            finally:
                await asyncio.to_thread(driver.quit)
        stop.set()
        await loading
    table = Table(
        "page", "updates", "p50 ms", "p95 ms", "max ms", title=f"page updates in Chromium ({settings.broker})"
    )
    for page, values in pages.items():
        table.add_row(page, *stats(values))
    out.print(table)
    seen = [latency * 1000 for latency in latencies]
    out.print(
        f"commit → row on the Missions page: p50 {statistics.median(seen):.0f} ms, max {max(seen):.0f} ms "
        f"({PROBES} probes); Swarm section {swarm_bytes / 1024:.0f} KiB with {len(shown['agents'])} agents; "
        f"console CPU {cpu * 100:.0f}% of one core while shown; {len(swarm.missions)} live missions, "
        f"{next(swarm.made)} made"
    )
    worst = max((max(values) for values in pages.values() if values), default=0.0)
    out.print(f"every update under {TARGET_MS:.0f} ms: {'yes' if worst < TARGET_MS else 'no'} (worst {worst:.0f} ms)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--broker", choices=("kafka", "tansu"), default="kafka")
    parser.add_argument("--agents", type=int, default=2000)
    parser.add_argument("--missions", type=int, default=100)
    arguments = parser.parse_args()
    base = dataclasses.replace(Settings.from_env(), broker=arguments.broker, bootstrap=None, regions=REGIONS)
    with open_broker(base) as broker, tempfile.TemporaryDirectory() as folder:
        settings = dataclasses.replace(base, bootstrap=broker.bootstrap)
        asyncio.run(run(settings, arguments.agents, arguments.missions, Path(folder)))


if __name__ == "__main__":
    main()
