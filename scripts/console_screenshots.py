"""Screenshots of `swarmlog console` for docs/operations.md (`make screenshots`), in Debian's headless Chromium.

A small swarm on the embedded broker (Tansu): a coordinator, a fleet of scripted agents (real agents, heartbeats and
all), the console; examples/pipeline.yaml is submitted, and a record that is no event is written to swarm.missions
(the coordinator dead-letters it). The Swarm and Missions pages are shot while the mission runs, the others once it
has completed, into docs/images/console-*.png. Every process
it starts is stopped before it exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from aiokafka import AIOKafkaProducer
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from swarmlog.kafka.admin import ensure_topics
from swarmlog.services import open_broker
from swarmlog.settings import Settings
from swarmlog.topics import MISSIONS

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images"
BRAIN = {"median_ms": 1200, "sigma": 0.3, "answers": 2}
GARBAGE = b'<script>alert("not an event")</script>'
PAGES = ("swarm", "missions", "mission", "waits", "deadletters")


def main() -> None:
    """Run the swarm, shoot every page, stop everything."""
    for name in ("chromium", "chromedriver"):
        if shutil.which(name) is None:
            sys.exit(f"{name} is not installed: `make setup-kafka` installs Debian's chromium and chromium-driver")
    settings = dataclasses.replace(Settings.from_env(), broker="tansu", bootstrap=None, regions=1)
    with open_broker(settings) as broker, tempfile.TemporaryDirectory() as folder:
        settings = dataclasses.replace(settings, bootstrap=broker.bootstrap)
        asyncio.run(ensure_topics(settings))
        work = Path(folder)
        (work / "brain.json").write_text(json.dumps(BRAIN))
        port = _free_port()
        with _processes(settings, work) as start:
            start("coordinator", "coordinator", "--region", "region-0", "--data-dir", str(work / "coordinator"))
            start(
                "fleet", "fleet", "--agents", "6", "--name", "agent", "--brain", "scripted", "--model",
                str(work / "brain.json"), "--capabilities", "coding,review,testing,decision_making", "--data-dir",
                str(work / "agents"),
            )  # fmt: skip
            start("console", "console", "--port", str(port))
            url = f"http://127.0.0.1:{port}"
            _until(lambda: len(_get(f"{url}/api/swarm")["agents"]) == 6, "the agents to register", work)
            mission_id = _submit(settings, work)
            asyncio.run(_garbage(settings))
            busy = ("BUSY",)
            _until(lambda: any(a["status"] in busy for a in _get(f"{url}/api/swarm")["agents"]), "a busy agent", work)
            _shoot(url, mission_id, PAGES[:2])  # while the mission runs
            _until(lambda: _phase(url, mission_id) == "COMPLETED", "the mission to complete", work)
            _until(lambda: _get(f"{url}/api/deadletters"), "the dead letter", work)
            _shoot(url, mission_id, PAGES[2:])
    print(f"screenshots of {', '.join(PAGES)} in {OUT.relative_to(ROOT)}/")


@contextlib.contextmanager
def _processes(settings: Settings, work: Path) -> Iterator[Callable[..., None]]:
    """A starter of `swarmlog` processes (each logging to <work>/<name>.log); all stopped at the end."""
    env = {**os.environ, "SWARMLOG_BROKER": "tansu", "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
           "SWARMLOG_REGIONS": "1"}  # fmt: skip
    env.pop("SWARMLOG_CONSOLE_TOKEN", None)
    running: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        with (work / f"{name}.log").open("ab") as log:
            running.append(subprocess.Popen([sys.executable, "-m", "swarmlog", *args], env=env, stdout=log, stderr=log))

    try:
        yield start
    finally:
        for process in running:
            process.send_signal(signal.SIGTERM)
        for process in running:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def _submit(settings: Settings, work: Path) -> str:
    """Submit examples/pipeline.yaml; its mission id."""
    env = {**os.environ, "SWARMLOG_BROKER": "tansu", "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    done = subprocess.run(
        [sys.executable, "-m", "swarmlog", "submit", str(ROOT / "examples" / "pipeline.yaml"), "--region", "region-0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


async def _garbage(settings: Settings) -> None:
    """A record that is no event, on swarm.missions: the coordinator dead-letters it."""
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        await producer.send_and_wait(MISSIONS, GARBAGE, key=b"not-a-mission")
    finally:
        await producer.stop()


def _shoot(url: str, mission_id: str, pages: tuple[str, ...]) -> None:
    """Pages in headless Chromium, as docs/images/console-<page>.png."""
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,900"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    OUT.mkdir(parents=True, exist_ok=True)
    try:
        for page in pages:
            address = f"{url}/#/mission/{mission_id}" if page == "mission" else f"{url}/#/{page}"
            driver.get(address)
            time.sleep(1.5)  # the stream's first sections, drawn
            if page == "mission":
                driver.execute_script("document.querySelector('button[data-name=\"TaskCompleted\"]').click()")
                time.sleep(0.3)
            driver.save_screenshot(str(OUT / f"console-{page}.png"))
    finally:
        driver.quit()


def _until(check: Callable[[], Any], what: str, work: Path, timeout_s: float = 120.0) -> None:
    """Wait for `check`, or exit naming what did not happen and where the logs are."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError):
            if check():
                return
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {log.name}\n{log.read_text()[-2000:]}" for log in sorted(work.glob("*.log")))
            sys.exit(f"timed out waiting for {what}\n{logs}")
        time.sleep(0.5)


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())


def _phase(url: str, mission_id: str) -> str:
    return str(_get(f"{url}/api/missions/{mission_id}")["summary"]["phase"])


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


if __name__ == "__main__":
    main()
