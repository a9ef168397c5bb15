"""Soak: steady missions for a long run while every kind of process is killed with -9 and garbage trickles in.

Starts Apache Kafka (single node) and Redis itself, then `swarmlog streams`, a region-0 `swarmlog coordinator` and
N scripted `swarmlog agent` processes, each a real process with its own data dir. Then, for --minutes:
- a mission of 2 tasks (replicas 2) and a vote is submitted every --mission-every seconds and followed to its end;
- about every --kill-every seconds one process, picked at random among all kinds, is killed with SIGKILL and
  started again on the same data dir (the supervisor here restarts; the product's processes recover on their own);
- a garbage record (empty, one byte, the magic alone, random bytes) goes to a random swarm.* topic every
  --garbage-every seconds (never the journal: its garbage has its own repair path);
- every process's RSS is sampled every 10 s.
Report: per process kind, RSS after warm-up (the first --warmup-minutes) against the end and the largest deviation
(the target: within +-10 %), kills survived; missions submitted, completed, failed, still open; mission latency per
5-minute window (bounded lag); garbage records written. Broker bounces are not part of this run yet (see
docs/benchmarks.md).
Run: .venv/bin/python bench/soak_bench.py [--minutes 30] [--agents 4] [--kill-every 20] [--mission-every 5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import os
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaProducer
from rich.console import Console
from rich.table import Table

from swarmlog.client import MissionClient, MissionTimeout
from swarmlog.kafka.admin import ensure_topics
from swarmlog.services import open_services, process
from swarmlog.settings import Settings
from swarmlog.topics import catalog

JOURNAL = "swarm.coordinator.journal"
GARBAGE = (b"", b"\x00", b"\xc3\x01", None)  # None: 64 random bytes
CAPABILITIES = "coding,review,decision_making"


@dataclasses.dataclass
class Proc:
    """One supervised process of the swarm: how to start it, the running child, and how often it was killed."""

    name: str
    kind: str
    argv: list[str]
    log: Path
    child: process.Child | None = None
    kills: int = 0
    rss_mb: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (seconds since start, MB)

    def start(self, env: dict[str, str]) -> None:
        """Start (or start again) the process, output appended to its log."""
        self.child = process.spawn([sys.executable, "-m", "swarmlog", *self.argv], name=self.name, log=self.log,
                                   env=env)

    def rss(self) -> float | None:
        """Resident memory in MB, or None when it is not running."""
        try:
            status = Path(f"/proc/{self.child.pid}/status").read_text() if self.child else ""
        except OSError:
            return None
        line = next((line for line in status.splitlines() if line.startswith("VmRSS:")), None)
        return int(line.split()[1]) / 1024 if line else None


def swarm(work: Path, agents: int) -> list[Proc]:
    """The processes of the soak: the streams worker, the coordinator and the agents, each with its data dir."""
    script = work / "brain.json"
    script.write_text(json.dumps({"median_ms": 300.0, "sigma": 0.3}))
    procs = [Proc("streams", "streams", ["streams", "--data-dir", str(work / "streams")], work / "streams.log"),
             Proc("coordinator", "coordinator", ["coordinator", "--region", "region-0", "--data-dir",
                                                 str(work / "coordinator")], work / "coordinator.log")]
    procs += [Proc(f"soak-{index}", "agent", ["agent", f"soak-{index}", "--capabilities", CAPABILITIES, "--brain",
                                              "scripted", "--model", str(script), "--region", "region-0",
                                              "--slot", str(index), "--data-dir", str(work / "agents")],
                   work / f"soak-{index}.log") for index in range(agents)]
    return procs


def mission(number: int) -> dict:
    """A small mission: two parallel tasks on two replicas each, a vote, a final decision."""
    return {"title": f"soak {number}", "mission_id": f"soak-{uuid.uuid4().hex[:10]}",
            "tasks": [{"task_id": "a", "prompt": "do a", "required_capabilities": ["coding"], "replicas": 2},
                      {"task_id": "b", "prompt": "do b", "required_capabilities": ["review"], "replicas": 2}],
            "consensus": {"strategy": "MAJORITY", "window_ms": 20_000, "quorum": 0.5},
            "final_action": {"prompt": "decide", "required_capabilities": ["decision_making"]},
            "deadline_ms": 300_000}


@dataclasses.dataclass
class Missions:
    """Submitted missions and how they ended (submitted s, latency s or None, outcome), and garbage records written."""

    runs: list[tuple[float, float | None, str]] = dataclasses.field(default_factory=list)
    garbage: int = 0


async def follow(client: MissionClient, mission_id: str, started: float, at_s: float, missions: Missions) -> None:
    """Wait for a mission's end and record it."""
    try:
        result = await client.wait(mission_id, "region-0", timeout_s=600)
        ok = result.name == "MissionCompleted" and result.data["success"]
        missions.runs.append((at_s, time.monotonic() - started, "completed" if ok else result.name))
    except MissionTimeout:
        missions.runs.append((at_s, None, "open"))


async def soak(args: argparse.Namespace, settings: Settings, procs: list[Proc], env: dict[str, str]) -> Missions:
    """Run the soak's loops until --minutes have passed; the missions and their ends."""
    client, missions, rng = MissionClient(settings, client_name="soak"), Missions(), random.Random(args.seed)
    began = time.monotonic()
    end = began + args.minutes * 60
    follows: list[asyncio.Task[None]] = []
    topics = [spec.name for spec in catalog(settings) if spec.name != JOURNAL]
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    next_mission = next_kill = next_garbage = next_sample = began
    number = 0
    try:
        while (now := time.monotonic()) < end:
            if now >= next_mission:
                mission_id = await client.submit(mission(number))
                follows.append(asyncio.create_task(follow(client, mission_id, now, now - began, missions)))
                number, next_mission = number + 1, now + args.mission_every
            if now >= next_kill:
                victim = rng.choice(procs)
                os.kill(victim.child.pid, 9)
                victim.child.popen.wait()
                victim.kills += 1
                victim.start(env)
                next_kill = now + rng.uniform(0.5, 1.5) * args.kill_every
            if now >= next_garbage:
                value = rng.choice(GARBAGE)
                # Keyed: compacted topics (the registry, the ground truth) refuse records without a key.
                await producer.send_and_wait(rng.choice(topics), rng.randbytes(64) if value is None else value,
                                             key=b"soak-garbage")
                missions.garbage, next_garbage = missions.garbage + 1, now + args.garbage_every
            if now >= next_sample:
                for proc in procs:
                    if (rss := proc.rss()) is not None:
                        proc.rss_mb.append((now - began, rss))
                next_sample = now + 10
            for proc in procs:  # a process that died on its own (not killed here) is a finding: restart and count
                if proc.child.death() is not None:
                    print(f"{proc.name} died on its own: {proc.child.death(lines=5)}", file=sys.stderr)
                    proc.start(env)
            await asyncio.sleep(0.2)
        if follows:
            await asyncio.wait(follows, timeout=120)  # the last missions' ends
    finally:
        for task in follows:
            task.cancel()
        await producer.stop()
    return missions


def report(args: argparse.Namespace, procs: list[Proc], missions: Missions, console: Console) -> None:
    """The tables: RSS per process kind, kills, missions and their latency per window."""
    warmup_s = args.warmup_minutes * 60
    rss = Table("process kind", "processes", "kills survived", "RSS after warm-up MB", "RSS at end MB",
                "largest deviation", "within +-10 %", title="Memory and kills")
    for kind in ("streams", "coordinator", "agent"):
        members = [proc for proc in procs if proc.kind == kind]
        after = [mb for proc in members for at, mb in proc.rss_mb if at >= warmup_s]
        if not after:
            continue
        first = [mb for proc in members for at, mb in proc.rss_mb if warmup_s <= at < warmup_s + 60] or after[:1]
        base = sum(first) / len(first)
        deviation = max(abs(mb - base) / base for mb in after)
        rss.add_row(kind, str(len(members)), str(sum(proc.kills for proc in members)), f"{base:.0f}",
                    f"{after[-1]:.0f}", f"{deviation:.1%}", "yes" if deviation <= 0.10 else "NO")
    console.print(rss)
    outcomes = Table("missions submitted", "completed", "failed", "still open", "garbage records",
                     title="Missions")
    ended = [outcome for _, _, outcome in missions.runs]
    outcomes.add_row(str(len(missions.runs)), str(ended.count("completed")),
                     str(sum(1 for o in ended if o not in ("completed", "open"))), str(ended.count("open")),
                     str(missions.garbage))
    console.print(outcomes)
    windows = Table("window (minutes)", "missions", "latency p50 s", "latency max s", title="Mission latency")
    for start in range(0, args.minutes, 5):
        latencies = sorted(latency for at, latency, _ in missions.runs
                           if latency is not None and start * 60 <= at < (start + 5) * 60)
        if latencies:
            windows.add_row(f"{start}-{start + 5}", str(len(latencies)), f"{latencies[len(latencies) // 2]:.1f}",
                            f"{latencies[-1]:.1f}")
    console.print(windows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=5.0)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=20.0)
    parser.add_argument("--mission-every", type=float, default=5.0)
    parser.add_argument("--garbage-every", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    console = Console(width=160)
    settings = dataclasses.replace(Settings.from_env(), broker="kafka", bootstrap=None, redis_url=None, regions=1)
    work = Path(tempfile.mkdtemp(prefix="swarmlog-soak-"))
    with open_services(settings) as services:
        settings = settings.with_services(bootstrap=services.broker.bootstrap, redis_url=services.redis.url)
        asyncio.run(ensure_topics(settings))
        env = os.environ | {"SWARMLOG_BROKER": "kafka", "SWARMLOG_BOOTSTRAP": settings.bootstrap,
                            "SWARMLOG_REDIS_URL": settings.redis_url or "", "SWARMLOG_REGIONS": "1"}
        procs = swarm(work, args.agents)
        try:
            for proc in procs:
                proc.start(env)
            console.print(f"soak for {args.minutes} min on {settings.bootstrap}; logs in {work}")
            missions = asyncio.run(soak(args, settings, procs, env))
        finally:
            process.stop_all([proc.child.popen for proc in procs if proc.child])
    report(args, procs, missions, console)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
