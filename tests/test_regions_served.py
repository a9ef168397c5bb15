"""Coordinators announce the regions they serve; missions go only to served regions, and an unserved one is said."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml
from coordinator.harness import task
from coordinator.live import eventually, journal, submit
from test_cli_ops import env, invoke

from swarmlog.client import MissionClient
from swarmlog.coordinator.announcements import Announcement, evolve, fold, holds, rival, served
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.coordinator.shell.announce import read_announcements
from swarmlog.coordinator.shell.repair import RepairRefused, repair
from swarmlog.envelope import now_ms, stamp
from swarmlog.errors import ConfigError
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import CoordinatorAnnounced, DrainRequested
from swarmlog.services import Broker
from swarmlog.settings import Settings

REGIONS = ("region-0", "region-1", "region-2")


def announced(
    region: str, at_ms: int, *, serving: bool = True, interval_ms: int = 2000, by: str = "host:1"
) -> CoordinatorAnnounced:
    return stamp(
        CoordinatorAnnounced,
        producer=f"coordinator:{region}",
        occurred_at_ms=at_ms,
        region=region,
        coordinator_id=by,
        serving=serving,
        interval_ms=interval_ms,
        agents=2,
        idle_agents=1,
        active_missions=0,
    )


# The pure fold and decision.


def test_a_region_is_served_while_announced_within_three_intervals() -> None:
    latest = fold([announced("region-1", 10_000)])
    assert served(latest, REGIONS, 10_000 + 6_000) == ("region-1",)
    assert served(latest, REGIONS, 10_000 + 6_001) == ()


def test_a_clean_stop_unserves_the_region_at_once_and_an_older_announcement_changes_nothing() -> None:
    latest = fold([announced("region-0", 1_000), announced("region-0", 2_000, serving=False)])
    assert served(latest, REGIONS, 2_001) == ()
    assert evolve(latest, announced("region-0", 1_500)) == latest  # a late, older word does not revive it


def test_other_events_are_no_announcements() -> None:
    other = stamp(DrainRequested, producer="operator", target="*", reason="x")
    assert evolve({}, other) == {}


def test_placement_uses_the_served_regions_only() -> None:
    client = MissionClient(dataclasses.replace(Settings(), regions=3))
    mission = {"title": "t", "tasks": [{"task_id": "a", "prompt": "p"}]}
    placed = {
        asyncio.run(client.placed(mission | {"mission_id": f"m{index}"}, ("region-2",))).region for index in range(20)
    }
    assert placed == {"region-2"}
    assert asyncio.run(client.placed(mission | {"region": "region-0"}, ("region-2",))).region == "region-0"


def test_announcement_expiry_is_three_intervals() -> None:
    announcement = Announcement("r", "c", True, at_ms=0, interval_ms=100, agents=0, idle_agents=0, active_missions=0)
    assert announcement.serves_at(300) and not announcement.serves_at(301)


def test_another_coordinator_serving_the_region_is_a_rival_and_none_is_when_it_stopped_went_silent_or_is_this_one():
    latest = fold([announced("region-1", 10_000)])  # by host:1
    assert rival(latest, "region-1", "other:2", 11_000) == latest["region-1"]
    assert rival(latest, "region-1", "host:1", 11_000) is None  # this process's own, a service started again in it
    assert rival(latest, "region-0", "other:2", 11_000) is None
    assert rival(latest, "region-1", "other:2", 16_001) is None  # silent for three intervals: killed
    stopped = fold([announced("region-1", 10_000), announced("region-1", 10_500, serving=False)])
    assert rival(stopped, "region-1", "other:2", 11_000) is None


def test_the_first_claim_holds_a_region_and_another_word_counts_only_once_the_holder_stopped_or_went_silent():
    claims = [
        announced("region-0", 1_000, by="a:1"),
        announced("region-1", 1_000, by="b:2", serving=False),
        announced("region-1", 1_000, by="c:3"),
        announced("region-1", 1_000, by="b:2"),  # claimed at once: c:3 holds it, so this word is void
    ]
    latest = fold(claims)
    assert holds(latest, "region-1", "c:3") and not holds(latest, "region-1", "b:2")
    assert holds(latest, "region-0", "a:1") and not holds(latest, "region-2", "a:1")
    assert fold([*claims, announced("region-1", 7_000, by="b:2")]) == latest  # c:3 still serves at 7,000
    taken = fold([*claims, announced("region-1", 7_001, by="b:2")])  # c:3 silent for three intervals: b:2 takes over
    assert holds(taken, "region-1", "b:2")
    assert fold([*claims[2:], announced("region-1", 9_000, by="c:3")]) == fold([announced("region-1", 9_000, by="c:3")])
    after_stop = fold([*claims, announced("region-1", 1_500, by="c:3", serving=False), announced("region-1", 1_600)])
    assert holds(after_stop, "region-1", "host:1")
    paused = fold([*claims, announced("region-1", 8_000, by="b:2"), announced("region-1", 8_500, by="c:3")])
    assert holds(paused, "region-1", "b:2") and not holds(paused, "region-1", "c:3")  # c:3 resumed too late


def test_a_lease_ends_an_interval_before_a_rival_may_take_over():
    announcement = Announcement("r", "c", True, at_ms=0, interval_ms=100, agents=0, idle_agents=0, active_missions=0)
    assert announcement.lease_until_ms == 200 < announcement.silent_from_ms - 100


# On real brokers (a broker of this module's own, so no coordinator of another test announces on it).


@pytest.fixture
def settings(own_settings: Settings) -> Settings:
    return own_settings


async def test_a_running_coordinator_serves_its_region_and_a_stopped_one_no_more(
    settings: Settings, tmp_path: Path
) -> None:
    client = MissionClient(settings)
    async with CoordinatorService(settings, "region-2", data_dir=tmp_path):
        assert "region-2" in await client.served_regions()
        assert "region-3" not in await client.served_regions()
    assert "region-2" not in await client.served_regions()


@pytest.mark.parametrize(
    ("region", "server"), [("region-3", "swarmlog coordinator --region region-3"), ("top", "swarmlog top")]
)
async def test_submit_warns_and_watch_says_it_waits_when_no_coordinator_serves_the_region(
    settings: Settings, tmp_path: Path, region: str, server: str
) -> None:
    mission = tmp_path / "mission.yaml"
    mission.write_text(
        yaml.safe_dump({"title": "unserved", "region": region, "tasks": [{"task_id": "a", "prompt": "p"}]})
    )

    submitted = await invoke(settings, "submit", str(mission), "--json")
    assert submitted.exit_code == 0, submitted.output
    assert f"warning: no coordinator serves {region} now" in submitted.stderr
    assert f"start `{server}`" in submitted.stderr
    mission_id = json.loads(submitted.stdout)["mission_id"]

    watched = await invoke(settings, "watch", mission_id, "--json", "--timeout-s", "15")
    assert watched.exit_code == 1
    waiting = [json.loads(line) for line in watched.stdout.splitlines() if '"waiting"' in line]
    assert waiting and waiting[0]["message"] == f"waiting: no coordinator serves {region}", watched.output


async def test_a_mission_without_a_region_goes_to_the_served_one(settings: Settings, tmp_path: Path) -> None:
    client = MissionClient(settings)
    async with CoordinatorService(settings, "region-1", data_dir=tmp_path):
        placed = {
            (
                await client.placed(
                    {"title": "t", "mission_id": uuid.uuid4().hex, "tasks": [{"task_id": "a", "prompt": "p"}]}
                )
            ).region
            for _ in range(8)
        }
    assert placed == {"region-1"}


async def test_a_broker_taken_for_kafka_works_on_kafka_and_on_tansu_names_init_producer_id(broker: Broker) -> None:
    """Given SWARMLOG_BROKER unset with a bootstrap (so taken for Kafka): on Kafka the idempotent producer starts; on
    Tansu the error names the refused InitProducerId and SWARMLOG_BROKER=tansu, not a broker that seems down."""
    settings = Settings.from_env({"SWARMLOG_BOOTSTRAP": broker.bootstrap})
    assert settings.broker == "external"
    if broker.kind != "tansu":
        async with EventProducer(settings, client_id="test"):
            return
    with pytest.raises(ConfigError, match=r"refused InitProducerId .* set SWARMLOG_BROKER=tansu"):
        async with EventProducer(settings, client_id="test"):
            pass


async def test_a_repair_is_refused_while_a_coordinator_serves_the_region(settings: Settings, tmp_path: Path) -> None:
    """The repair command writes the region's journal as its coordinator: while one announces that it serves the
    region, nothing is written (Tansu has nothing that would fence it)."""
    async with CoordinatorService(settings, "region-2", data_dir=tmp_path):
        with pytest.raises(RepairRefused, match=r"a coordinator still serves region-2 .* stop it first"):
            await repair(settings, "region-2", [0], "garbage", "test")


def test_a_coordinator_does_not_start_beside_a_live_one_of_its_region_and_starts_at_once_after_it_is_killed(
    settings: Settings, tmp_path: Path
) -> None:
    first = _coordinator(settings, "region-1", tmp_path / "first")
    try:
        assert _served_by(settings, "region-1", first.pid), (tmp_path / "first.log").read_text()
        _refused_beside(settings, _coordinator_args("region-1", tmp_path / "second"), "region-1", first)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    third = _coordinator(settings, "region-1", tmp_path / "third")
    try:
        assert _served_by(settings, "region-1", third.pid), (tmp_path / "third.log").read_text()
    finally:
        third.send_signal(signal.SIGTERM)
        assert third.wait(60) == 0
    assert "waiting up to" not in (tmp_path / "third.log").read_text(), "a killed one of this host is not waited for"


def test_a_coordinator_paused_past_its_lease_writes_nothing_more_once_another_took_its_region_over(
    settings: Settings, tmp_path: Path
) -> None:
    first = _coordinator(settings, "region-2", tmp_path / "first")
    second: subprocess.Popen[bytes] | None = None
    try:
        assert _served_by(settings, "region-2", first.pid), (tmp_path / "first.log").read_text()
        first.send_signal(signal.SIGSTOP)  # a pause: a stalled host, a frozen VM
        second = _coordinator(settings, "region-2", tmp_path / "second")  # waits out the first's silence, then serves
        assert _served_by(settings, "region-2", second.pid), (tmp_path / "second.log").read_text()
        mission = f"paused-{uuid.uuid4().hex[:8]}"  # both read it: the paused one finds it when it resumes
        asyncio.run(submit(settings, mission, "region-2", [task("a", "code")]))
        assert asyncio.run(eventually(lambda: journal(settings, "region-2", mission)))
        first.send_signal(signal.SIGCONT)
        assert first.wait(60) == 3, (tmp_path / "first.log").read_text()
        said = (tmp_path / "first.log").read_text()
        assert f"region region-2 is served by the coordinator {os.uname().nodename}:{second.pid}" in said
        assert "reading the announcements before the next write" in said  # it noticed its pause
        ids = [event.event_id for event in asyncio.run(journal(settings, "region-2", mission))]
        assert len(ids) == len(set(ids)), "the resumed coordinator decided nothing on the mission again"
        assert second.poll() is None and _served_by(settings, "region-2", second.pid)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(30)
        if second is not None:
            second.send_signal(signal.SIGTERM)
            assert second.wait(60) == 0


def test_a_second_top_level_does_not_start_beside_a_live_one(settings: Settings, tmp_path: Path) -> None:
    first = _process(settings, ["top"], tmp_path / "top.log")
    try:
        assert _served_by(settings, "top", first.pid), (tmp_path / "top.log").read_text()
        _refused_beside(settings, ["top"], "top", first)
    finally:
        first.send_signal(signal.SIGTERM)
        assert first.wait(60) == 0


def _refused_beside(settings: Settings, args: list[str], region: str, first: subprocess.Popen[bytes]) -> None:
    """`swarmlog <args>` exits with code 3, naming `first`, which serves `region` and goes on."""
    second = subprocess.run(
        [sys.executable, "-m", "swarmlog", *args],
        env={**os.environ, **env(settings)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 3, second.stderr
    assert f"region {region} is served by the coordinator {os.uname().nodename}:{first.pid}" in second.stderr
    assert first.poll() is None, "the running one goes on"


def _coordinator_args(region: str, data_dir: Path) -> list[str]:
    return ["coordinator", "--region", region, "--data-dir", str(data_dir)]


def _coordinator(settings: Settings, region: str, data_dir: Path) -> subprocess.Popen[bytes]:
    """`swarmlog coordinator` for the region, logging to <data_dir>.log."""
    return _process(settings, _coordinator_args(region, data_dir), data_dir.with_suffix(".log"))


def _process(settings: Settings, args: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    """`swarmlog <args>` on the test's broker, logging to `log_path`."""
    with log_path.open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "swarmlog", *args],
            env={**os.environ, **env(settings)},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _served_by(settings: Settings, region: str, pid: int, timeout_s: float = 90) -> bool:
    """Whether the region's latest announcement comes from the process `pid` as serving, within `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        latest = asyncio.run(read_announcements(settings)).get(region)
        if latest is not None and latest.coordinator_id.endswith(f":{pid}") and latest.serves_at(now_ms()):
            return True
        time.sleep(0.5)
    return False


def test_of_two_coordinators_of_a_region_started_together_one_serves_and_the_other_exits(
    settings: Settings, tmp_path: Path
) -> None:
    pair = [_coordinator(settings, "region-3", tmp_path / name) for name in ("left", "right")]
    try:
        deadline = time.monotonic() + 120
        while all(process.poll() is None for process in pair) and time.monotonic() < deadline:
            time.sleep(0.5)
        codes = [process.poll() for process in pair]
        assert sorted(codes, key=str) == [3, None], codes
        [serving] = [process for process in pair if process.poll() is None]
        assert _served_by(settings, "region-3", serving.pid)  # the one that exited announced no stop
    finally:
        for process in pair:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                assert process.wait(60) == 0
