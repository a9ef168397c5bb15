"""`swarmlog console` in a real headless Chromium (Debian's, driven by Selenium through Debian's chromedriver), on the
session's broker: a mission the test submits appears, advances and completes on the page through a restart of its
coordinator, its timeline opens each event with its payload and coordinates, and a reload finds it again; an agent
killed with -9 mid-task turns DEAD once the streams worker declares it dead, and its task moves to another agent; a dead letter holding markup is shown as text and runs nothing; and a page whose console
restarts reconnects by itself.

Selenium's calls block: the browser is driven from a thread, so the coordinator and agents of the test keep running on
the event loop meanwhile. One console serves every test of a broker but the one that restarts its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from coordinator.harness import task
from coordinator.live import crew, submit
from selenium import webdriver
from selenium.webdriver.chrome.service import Service

from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.envelope import stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import (
    AgentRegistered,
    DeadLetterRecorded,
    WaitEnded,
    WaitStarted,
)
from swarmlog.settings import Settings
from swarmlog.topics import DEAD_LETTERS, MISSIONS, REGISTRY, WAITS

sys.path[:0] = [str(Path(__file__).parents[1] / "streams"), str(Path(__file__).parents[1] / "actors")]
from agent_harness import start_agent
from worker_harness import Worker

pytestmark = pytest.mark.slow
MARKUP = '<script>window.__pwned = 1</script><img src="x" onerror="window.__pwned = 2">'


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and body of a GET that follows no redirect."""

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=5) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as refused:
        return refused.code, dict(refused.headers), refused.read()


@contextlib.contextmanager
def console(
    settings: Settings, tmp_path: Path, *flags: str, token: str | None = None, port: int | None = None
) -> Iterator[str]:
    """`swarmlog console` on a loopback port (a free one unless given), until it shows the log live; its address."""
    port = port or free_port()
    env = {**os.environ, "SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    env.pop("SWARMLOG_CONSOLE_TOKEN", None)
    if token:
        env["SWARMLOG_CONSOLE_TOKEN"] = token
    log = (tmp_path / f"console-{port}.log").open("ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "swarmlog", "console", "--port", str(port), *flags],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, (tmp_path / f"console-{port}.log").read_text()
            with contextlib.suppress(OSError):
                status, _, body = get(f"{url}/api/status", auth)
                if status == 200 and json.loads(body)["state"] == "live":
                    break
            assert time.monotonic() < deadline, "the console did not show the log live within 30 s"
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


@pytest.fixture(scope="module")
def shared(settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One console for the module's tests that do not restart it (it reads the whole log, live): its address."""
    with console(settings, tmp_path_factory.mktemp("console")) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[webdriver.Chrome]:
    """Debian's headless Chromium through Debian's chromedriver (no driver download)."""
    missing = [name for name in ("chromium", "chromedriver") if shutil.which(name) is None]
    assert not missing, f"{' and '.join(missing)} not installed: `make setup-kafka` installs Debian's chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or ""
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    try:
        yield driver
    finally:
        driver.quit()


async def until(check: Callable[[], Any], timeout_s: float = 30.0) -> Any:
    """The first truthy result of `check` (run in a thread: it drives the browser), polled every 100 ms."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = await asyncio.to_thread(check)
        if result:
            return result
        assert time.monotonic() < deadline, f"not within {timeout_s} s"
        await asyncio.sleep(0.1)


def texts(driver: webdriver.Chrome, css: str) -> list[str]:
    """The text of every element `css` selects, read at one instant (the page redraws its tables as events come)."""
    found: list[str] = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), node => node.textContent)", css
    )
    return found


def click(driver: webdriver.Chrome, css: str) -> None:
    """Click the first element `css` selects, found and clicked at one instant."""
    driver.execute_script("document.querySelector(arguments[0]).click()", css)


async def test_a_submitted_mission_appears_advances_and_completes_on_the_page_through_a_coordinator_restart(
    settings: Settings, tmp_path: Path, browser: webdriver.Chrome, shared: str
) -> None:
    capability = f"console-{uuid.uuid4().hex[:8]}"
    mission_id = f"m-{capability}"
    row = f'tr[data-mission="{mission_id}"]'
    seen: list[tuple[str, str]] = []

    def shown(phase: str | None = None, tasks: str | None = None) -> bool:
        """Whether the mission's row shows the phase and tasks asked for (any when None); every change is noted."""
        cells = texts(browser, f"{row} td.phase") + texts(browser, f"{row} td.tasks")
        if len(cells) < 2:
            return False
        if not seen or seen[-1] != (cells[0], cells[1]):
            seen.append((cells[0], cells[1]))
        return phase in (None, cells[0]) and tasks in (None, cells[1])

    url = shared
    await asyncio.to_thread(browser.get, f"{url}/#/missions")
    async with crew(settings, "region-0", 2, capability, first_slot=60, latency_s=1.0):
        async with CoordinatorService(settings, "region-0", data_dir=tmp_path):
            tasks = [task("draft", capability), task("check", capability, depends_on=["draft"])]
            await submit(settings, mission_id, "region-0", tasks)
            await until(lambda: shown() and "DONE 1" in seen[-1][1])
        # The coordinator stops mid-mission and starts again from its journal; the page follows it to the end.
        async with CoordinatorService(settings, "region-0", data_dir=tmp_path):
            await until(lambda: shown("COMPLETED"), timeout_s=45)
    assert seen[-1] == ("COMPLETED", "DONE 2"), seen
    assert any(tasks != "DONE 2" for _, tasks in seen) and seen[0][0] != "COMPLETED", seen

    # The mission's page: its timeline in lanes, each event opening with its payload and coordinates.
    await asyncio.to_thread(click, browser, f"{row} a")
    await until(lambda: texts(browser, 'button[data-name="MissionCompleted"]'))
    assert texts(browser, "#mission-phase") == ["COMPLETED"]
    lanes = texts(browser, ".timeline .lane-head")
    assert {f"{capability}-0", f"{capability}-1"} & set(lanes) and "coordinator" in lanes, lanes
    await asyncio.to_thread(click, browser, 'button[data-name="TaskStarted"]')
    payload = json.loads(await until(lambda: "".join(texts(browser, "#event-payload"))))
    assert payload["mission_id"] == mission_id and payload["task_id"] in ("draft", "check")
    assert texts(browser, "#event-place")[0].startswith("swarm.tasks.events[")

    # A reload finds the same page, from the log.
    await asyncio.to_thread(browser.refresh)
    await until(lambda: texts(browser, "#mission-phase") == ["COMPLETED"])
    await asyncio.to_thread(browser.get, f"{url}/#/swarm")
    await until(lambda: texts(browser, f'tr[data-agent="{capability}-0"]'))


async def test_a_killed_agent_turns_dead_on_the_page_and_its_task_moves_to_another(
    settings: Settings, tmp_path: Path, browser: webdriver.Chrome, shared: str
) -> None:
    capability = f"console-{uuid.uuid4().hex[:8]}"
    victim, mission_id = f"{capability}-victim", f"m-{capability}"
    task_cells = 'tr[data-task="t/0"] td'
    brain = tmp_path / "brain.json"
    brain.write_text(json.dumps({"median_ms": 30_000, "sigma": 0.05}))  # it holds its task until it is killed
    quick = tmp_path / "quick.json"
    quick.write_text(json.dumps({"median_ms": 500, "sigma": 0.05}))  # the agent started after the kill
    worker = Worker(settings.bootstrap or "", settings.broker, settings.redis_url or "", tmp_path / "streams",
                    liveness_timeout_ms=2000)  # fmt: skip
    url = shared
    await asyncio.to_thread(worker.start)

    def scripted(model: Path) -> list[str]:
        """The flags of a scripted agent of the region with the test's capability, heartbeating every 250 ms."""
        return ["--region", "region-0", "--capabilities", capability, "--brain", "scripted", "--model", str(model),
                "--heartbeat-s", "0.25"]  # fmt: skip

    agent = start_agent(settings, victim, 58, tmp_path, *scripted(brain))
    heir = None
    try:
        async with CoordinatorService(settings, "region-0", data_dir=tmp_path):
            await asyncio.to_thread(browser.get, f"{url}/#/swarm")
            await until(lambda: texts(browser, f'tr[data-agent="{victim}"] td.status'), timeout_s=60)
            await submit(settings, mission_id, "region-0", [task("t", capability)])
            await asyncio.to_thread(browser.get, f"{url}/#/mission/{mission_id}")
            await until(lambda: texts(browser, task_cells)[2:5:2] == ["RUNNING", victim], timeout_s=60)
            agent.send_signal(signal.SIGKILL)  # kill -9 mid-task: the worker notices its silence
            agent.wait(10)
            heir = start_agent(settings, f"{capability}-heir", 59, tmp_path, *scripted(quick))
            await until(lambda: texts(browser, task_cells)[2:5] == ["DONE", "2", f"{capability}-heir"], 90)
        assert texts(browser, "button.mark-reassigned")
        await asyncio.to_thread(browser.get, f"{url}/#/swarm")
        await until(lambda: texts(browser, f'tr[data-agent="{victim}"] td.status') == ["DEAD"])
    finally:
        for process in (agent, heir):
            if process is not None and process.poll() is None:
                process.kill()
        worker.stop()


async def test_a_dead_letter_holding_markup_is_shown_as_text_and_runs_nothing(
    settings: Settings, tmp_path: Path, browser: webdriver.Chrome, shared: str
) -> None:
    marker = uuid.uuid4().hex
    payload = f"{marker}{MARKUP}".encode()
    async with EventProducer(settings, client_id="test-console") as producer:
        await producer.send(
            DEAD_LETTERS,
            stamp(
                DeadLetterRecorded,
                producer="test",
                origin_topic=MISSIONS,
                origin_partition=0,
                origin_offset=10**15,  # no real record's: the session's other tests count dead letters by origin
                origin_key=b"<b>key</b>",
                payload=payload,
                error_type="DecodeError",
                reason=f"not a swarmlog event: {MARKUP}",
                consumer="test",
            ),
            key=MISSIONS,
        )
    url = shared
    await asyncio.to_thread(browser.get, f"{url}/#/deadletters")
    shown = await until(lambda: [text for text in texts(browser, "code.payload-text") if marker in text])
    assert shown == [payload.decode()]
    assert f"not a swarmlog event: {MARKUP}" in texts(browser, "td.reason")
    assert payload.hex() in texts(browser, "code.hex")
    assert browser.execute_script("return window.__pwned") is None
    assert browser.execute_script("return document.scripts.length") == 1  # the console's own
    assert not texts(browser, "#deadletters img, #deadletters script")


async def test_the_page_recovers_when_the_console_restarts(
    settings: Settings, tmp_path: Path, browser: webdriver.Chrome
) -> None:
    port = free_port()
    with console(settings, tmp_path, port=port) as url:
        await asyncio.to_thread(browser.get, f"{url}/#/swarm")
        await until(lambda: texts(browser, "#link") == ["live"] and texts(browser, "#regions tr[data-region]"))
    await until(lambda: texts(browser, "#link") != ["live"])  # the stream is gone; the page keeps trying
    with console(settings, tmp_path, port=port):
        await until(lambda: texts(browser, "#link") == ["live"], timeout_s=15)
        await until(lambda: "live" in "".join(texts(browser, "#feed")))


async def test_the_waits_page_shows_a_cycle_of_waits_until_one_of_them_ends(
    settings: Settings, tmp_path: Path, browser: webdriver.Chrome, shared: str
) -> None:
    a, b = (f"waiter-{uuid.uuid4().hex[:8]}" for _ in range(2))
    starts = [
        stamp(WaitStarted, producer=f"agent:{x}", wait_id=f"{x}-w", waiter_agent_id=x, waits_for_agent_id=y)
        for x, y in ((a, b), (b, a))
    ]
    first, second = sorted((a, b))
    drawn = f"{first} → {second} → {first}"
    url = shared
    await asyncio.to_thread(browser.get, f"{url}/#/waits")
    async with EventProducer(settings, client_id="test-console") as producer:
        for start in starts:
            await producer.send(WAITS, start, key=start.waiter_agent_id)
        await until(lambda: any(drawn in text for text in texts(browser, "tr.cycle")))
        assert len(texts(browser, f'tr[data-wait="{a}-w"], tr[data-wait="{b}-w"]')) == 2
        end = stamp(
            WaitEnded, producer=f"agent:{a}", wait_id=f"{a}-w", waiter_agent_id=a, waits_for_agent_id=b,
            outcome="ABORTED",
        )  # fmt: skip
        await producer.send(WAITS, end, key=a)
    await until(lambda: not any(drawn in text for text in texts(browser, "tr.cycle")))


async def test_the_replay_page_folds_a_component_up_to_a_time_and_compares_it_with_the_live_state(
    settings: Settings, tmp_path: Path, browser: webdriver.Chrome, shared: str
) -> None:
    agent = f"replayed-{uuid.uuid4().hex[:8]}"
    before = datetime.now(UTC).isoformat()
    registration = stamp(
        AgentRegistered, producer=f"agent:{agent}", agent_id=agent, capabilities=["x"], model="scripted",
        brain="scripted", node="test", gpu=None, region="region-0", slot=1,
    )  # fmt: skip
    async with EventProducer(settings, client_id="test-console") as producer:
        await producer.send(REGISTRY, registration, key=agent)
    entry = f'tr[data-entry="agents/{agent}"]'

    def replayed(component: str, key: str, at: str) -> None:
        browser.execute_script(
            "document.getElementById('replay-component').value = arguments[0];"
            "document.getElementById('replay-key').value = arguments[1];"
            "document.getElementById('replay-at').value = arguments[2];"
            "document.getElementById('replay-result').replaceChildren();"
            "document.getElementById('replay-run').click()",
            component, key, at,
        )  # fmt: skip

    url = shared
    await asyncio.to_thread(browser.get, f"{url}/#/replay")
    await asyncio.to_thread(replayed, "registry", "", "")
    summary = await until(lambda: "".join(texts(browser, "#replay-summary")))
    assert "events folded" in summary and "differ from the console's live state" in summary

    def live_has_it() -> bool:
        """Replayed to the log's end by key (the session's registry holds every earlier test's agents): the entry's
        row has its four cells (entry, replayed, live, whether they differ), and the console's live view has it."""
        replayed("registry", agent, "")
        deadline = time.monotonic() + 30
        while not texts(browser, "#replay-summary") and time.monotonic() < deadline:
            time.sleep(0.1)
        cells = texts(browser, f"{entry} td")
        return len(cells) == 4 and cells[2] != "null"

    await until(live_has_it, timeout_s=60)
    await asyncio.to_thread(replayed, "registry", agent, before)
    await until(lambda: texts(browser, "#replay-summary"))
    cells = await until(lambda: texts(browser, f"{entry} td"))
    assert cells[1] == "null" and cells[3] == "differs"  # not registered yet then, registered now
    await asyncio.to_thread(replayed, "coordinator", "region-0", before)  # no live state here: the log's end instead
    summary = await until(lambda: "".join(texts(browser, "#replay-summary")))
    assert "differ from the log's end" in summary, summary
    assert texts(browser, "#replay-result th")[:3] == ["entry", "replayed", "now"]
    await asyncio.to_thread(replayed, "coordinator", "region-99", "")
    assert "unknown region" in await until(lambda: "".join(texts(browser, "#replay-error")))
