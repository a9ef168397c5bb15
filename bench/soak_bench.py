"""Soak: steady missions for a long run while every kind of process is killed with -9, the broker is bounced and
garbage trickles in.

Starts Apache Kafka (single node) and Redis itself, then `swarmlog streams`, a region-0 `swarmlog coordinator` and
N scripted `swarmlog agent` processes, each a real process with its own data dir. Then, for --minutes:
- a mission of 2 tasks (replicas 2) and a vote is submitted every --mission-every seconds and followed to its end;
- about every --kill-every seconds one process, picked at random among all kinds, is killed with SIGKILL and
  started again on the same data dir (the supervisor here restarts; the product's processes recover on their own);
- every --bounce-every seconds, while the latest mission is under way, the broker is stopped, alternately with
  SIGTERM (a clean stop) and SIGKILL (a crash), and started again on its ports and data dir; the other loops pause
  until it answers again, so no kill, mission submission or garbage falls inside the outage, while the missions under
  way ride it out;
- a garbage record (empty, one byte, the magic alone, random bytes) goes to a random swarm.* topic every
  --garbage-every seconds (never the journal: its garbage has its own repair path);
- every process's RSS is sampled every 10 s, from 30 s after its (re)start.
Report: per process kind, RSS in the first minute after warm-up (the first --warmup-minutes) against the last minute
and the largest deviation (the target: within +-10 %), kills survived and deaths on its own; each bounce's outage
and the missions under way across it; missions submitted, completed, failed, still open, and from each mission's
journal the task results recorded twice for one attempt (doubled) or never (lost); mission latency per 5-minute
window (bounded lag); garbage records written per kind.
Run: .venv/bin/python bench/soak_bench.py [--minutes 30] [--agents 4] [--kill-every 20] [--mission-every 5]
     [--bounce-every 300]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from aiokafka import AIOKafkaProducer
from rich.console import Console
from rich.table import Table

from swarmlog import logs, topics
from swarmlog.client import MissionClient
from swarmlog.coordinator.state import FINAL_TASK
from swarmlog.kafka.admin import ensure_topics
from swarmlog.schemas.records import MissionCompleted, TaskCancelled, TaskResultRecorded
from swarmlog.services import KafkaNode, open_redis, process, run_kafka_cluster
from swarmlog.settings import Settings
from swarmlog.topics import catalog

sys.path[:0] = [str(Path(__file__).parents[1] / "tests")]
from coordinator.live import attempts

GARBAGE = {"empty": b"", "one byte": b"\x00", "magic alone": b"\xc3\x01", "64 random bytes": None}
CAPABILITIES = "coding,review,decision_making"
AFTER_BOUNCE_S = 60  # a process that dies on its own this soon after a bounce counts against that bounce
SAMPLE_EVERY_S = 10
SETTLE_S = 30  # a process's RSS is sampled from this long after its (re)start: a fresh one is still loading


@dataclasses.dataclass
class Proc:
    """One supervised process of the swarm: how to start it, the running child, its kills and deaths on its own."""

    name: str
    kind: str
    argv: list[str]
    log: Path
    child: process.Child | None = None
    started: float = 0.0  # time.monotonic() of the latest start
    kills: int = 0
    deaths: list[float] = dataclasses.field(default_factory=list)  # seconds since start
    rss_mb: list[tuple[float, float]] = dataclasses.field(default_factory=list)  # (seconds since start, MB)

    def start(self, env: dict[str, str]) -> None:
        """Start (or start again) the process, output appended to its log."""
        self.started = time.monotonic()
        self.child = process.spawn(
            [sys.executable, "-m", "swarmlog", *self.argv], name=self.name, log=self.log, env=env
        )

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
    procs = [
        Proc("streams", "streams", ["streams", "--data-dir", str(work / "streams")], work / "streams.log"),
        Proc(
            "coordinator",
            "coordinator",
            ["coordinator", "--region", "region-0", "--data-dir", str(work / "coordinator")],
            work / "coordinator.log",
        ),
    ]
    procs += [
        Proc(
            f"soak-{index}",
            "agent",
            [
                "agent",
                f"soak-{index}",
                "--capabilities",
                CAPABILITIES,
                "--brain",
                "scripted",
                "--model",
                str(script),
                "--region",
                "region-0",
                "--slot",
                str(index),
                "--data-dir",
                str(work / "agents"),
            ],
            work / f"soak-{index}.log",
        )
        for index in range(agents)
    ]
    return procs


def mission(number: int) -> dict:
    """A small mission: two parallel tasks on two replicas each, a vote, a final decision."""
    return {
        "title": f"soak {number}",
        "mission_id": f"soak-{uuid.uuid4().hex[:10]}",
        "tasks": [
            {"task_id": "a", "prompt": "do a", "required_capabilities": ["coding"], "replicas": 2},
            {"task_id": "b", "prompt": "do b", "required_capabilities": ["review"], "replicas": 2},
        ],
        "consensus": {"strategy": "MAJORITY", "window_ms": 20_000, "quorum": 0.5},
        "final_action": {"prompt": "decide", "required_capabilities": ["decision_making"]},
        "deadline_ms": 300_000,
    }


def planned(spec: dict) -> set[tuple[str, int]]:
    """The (task, replica) pairs a mission's journal must hold a result for once it has completed."""
    return {(task["task_id"], replica) for task in spec["tasks"] for replica in range(task["replicas"])} | {
        (FINAL_TASK, 0)
    }


@dataclasses.dataclass
class MissionRun:
    """One submitted mission: submitted and ended (s since start; None while open), how it ended, and its task
    results recorded twice for one attempt (doubled) or not at all (lost)."""

    at_s: float
    end_s: float | None
    outcome: str
    doubled: int = 0
    lost: int = 0

    @property
    def latency_s(self) -> float | None:
        """Submission to end, or None while open."""
        return None if self.end_s is None else self.end_s - self.at_s


@dataclasses.dataclass
class Bounce:
    """One broker bounce: when it began (s since start), the signal it was stopped with, how it exited, the outage."""

    at_s: float
    signal: str
    exit: str
    outage_s: float

    def overlaps(self, run: MissionRun) -> bool:
        """Whether the mission was under way during the outage."""
        return run.at_s <= self.at_s + self.outage_s and (run.end_s is None or run.end_s >= self.at_s)


@dataclasses.dataclass
class Tally:
    """What the soak did and saw: the missions, the broker bounces, the garbage records written per kind."""

    missions: list[MissionRun] = dataclasses.field(default_factory=list)
    bounces: list[Bounce] = dataclasses.field(default_factory=list)
    garbage: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)


async def follow(client: MissionClient, spec: dict, began: float, at_s: float, tally: Tally) -> None:
    """Read a mission's journal up to its end and record how it ended, with its doubled and lost results."""
    try:
        async with asyncio.timeout(600):
            events = [event async for event in client.follow(spec["mission_id"], "region-0")]
    except TimeoutError:
        tally.missions.append(MissionRun(at_s, None, "open"))
        return
    ended, recorded = events[-1], attempts(events, TaskResultRecorded)
    ok = isinstance(ended, MissionCompleted) and ended.success
    if not ok:
        print(f"mission {spec['mission_id']} ended with {ended.name}: {ended}", file=sys.stderr)
    # A replica its task's cross-check closed without (the consensus window passed) is cancelled, not lost.
    cancelled = {(event.task_id, event.replica) for event in events if isinstance(event, TaskCancelled)}
    lost = planned(spec) - {(task, replica) for _, task, replica, _ in recorded} - cancelled if ok else set()
    tally.missions.append(
        MissionRun(
            at_s,
            time.monotonic() - began,
            "completed" if ok else ended.name,
            doubled=sum(count - 1 for count in recorded.values()),
            lost=len(lost),
        )
    )


async def bounce(node: KafkaNode, crash: bool, at_s: float) -> Bounce:
    """Stop the broker (SIGKILL when `crash`, else SIGTERM), start it again on its ports and data dir, and wait until
    it answers."""
    started = time.monotonic()
    await asyncio.to_thread(node.kill if crash else node.stop)
    exited = process.describe_exit(node.child.popen.returncode)
    node.spawn()  # from the loop's thread, which outlives the broker: a node dies with the thread that spawned it
    await asyncio.to_thread(node.wait_ready, 180)
    return Bounce(at_s, "SIGKILL" if crash else "SIGTERM", exited, time.monotonic() - started)


def next_kill(rng: random.Random, every: float) -> float:
    """When the next kill is due: about `every` seconds from now."""
    return time.monotonic() + rng.uniform(0.5, 1.5) * every


async def soak(
    args: argparse.Namespace, settings: Settings, node: KafkaNode, procs: list[Proc], env: dict[str, str]
) -> Tally:
    """Run the soak's loops until --minutes have passed; what they did and saw."""
    client, tally, rng = MissionClient(settings, client_name="soak"), Tally(), random.Random(args.seed)
    began = time.monotonic()
    end = began + args.minutes * 60
    follows: list[asyncio.Task[None]] = []
    garbage_topics = [spec.name for spec in catalog(settings) if spec.name != topics.JOURNAL]
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap, enable_idempotence=True, acks="all")
    await producer.start()
    due_mission = due_kill = due_garbage = due_sample = began
    due_bounce = began + args.bounce_every
    number = 0
    try:
        while (now := time.monotonic()) < end:
            # A bounce comes while the latest mission is under way, alone in its turn: nothing else happens until
            # the broker answers again.
            if now >= due_bounce and follows and not follows[-1].done():
                tally.bounces.append(await bounce(node, crash=len(tally.bounces) % 2 == 1, at_s=now - began))
                due_bounce, due_kill = time.monotonic() + args.bounce_every, next_kill(rng, args.kill_every)
                continue
            if now >= due_mission:
                spec = mission(number)
                await client.submit(spec)
                follows.append(asyncio.create_task(follow(client, spec, began, now - began, tally)))
                number, due_mission = number + 1, now + args.mission_every
            if now >= due_kill:
                victim = rng.choice(procs)
                os.kill(victim.child.pid, 9)
                victim.child.popen.wait()
                victim.kills += 1
                victim.start(env)
                due_kill = next_kill(rng, args.kill_every)
            if now >= due_garbage:
                kind = rng.choice(sorted(GARBAGE))
                value = GARBAGE[kind]
                # Keyed: compacted topics (the registry, the ground truth) refuse records without a key.
                await producer.send_and_wait(
                    rng.choice(garbage_topics), rng.randbytes(64) if value is None else value, key=b"soak-garbage"
                )
                tally.garbage[kind] += 1
                due_garbage = now + args.garbage_every
            if now >= due_sample:
                for proc in procs:
                    if now - proc.started >= SETTLE_S and (rss := proc.rss()) is not None:
                        proc.rss_mb.append((now - began, rss))
                due_sample = now + SAMPLE_EVERY_S
            for proc in procs:  # a process that died on its own (not killed here) is a finding: restart and count
                if proc.child.death() is not None:
                    print(f"at {now - began:.0f} s {proc.child.death(lines=5)}", file=sys.stderr)
                    proc.deaths.append(now - began)
                    proc.start(env)
            await asyncio.sleep(0.2)
        if follows:
            await asyncio.wait(follows, timeout=120)  # the last missions' ends
    finally:
        for task in follows:
            task.cancel()
        await producer.stop()
    return tally


def memory_table(args: argparse.Namespace, procs: list[Proc]) -> Table:
    """RSS per process kind after warm-up against the end, kills survived and deaths on its own."""
    warmup_s = args.warmup_minutes * 60
    table = Table(
        "process kind",
        "processes",
        "kills survived",
        "died on its own",
        "RSS after warm-up MB",
        "RSS at end MB",
        "largest deviation",
        "within +-10 %",
        title=f"Memory (first and last minute's mean, samples from {SETTLE_S} s after each start), kills and deaths",
    )
    for kind in ("streams", "coordinator", "agent"):
        members = [proc for proc in procs if proc.kind == kind]
        after = [mb for _, mb in sorted((at, mb) for proc in members for at, mb in proc.rss_mb if at >= warmup_s)]
        if not after:
            continue
        minute = len(members) * 60 // SAMPLE_EVERY_S  # about a minute of the kind's samples
        base, final = statistics.mean(after[:minute]), statistics.mean(after[-minute:])
        deviation = max(abs(mb - base) / base for mb in after)
        table.add_row(
            kind,
            str(len(members)),
            str(sum(proc.kills for proc in members)),
            str(sum(len(proc.deaths) for proc in members)),
            f"{base:.0f}",
            f"{final:.0f}",
            f"{deviation:.1%}",
            "yes" if deviation <= 0.10 else "NO",
        )
    return table


def bounce_table(tally: Tally, procs: list[Proc]) -> Table:
    """Each broker bounce: its stop, its outage, the missions under way across it and deaths that followed it."""
    table = Table(
        "bounce at min",
        "stopped with",
        "broker",
        "outage s",
        "missions across it",
        "their ends",
        "their latency max s",
        f"deaths within {AFTER_BOUNCE_S} s",
        title="Broker bounces",
    )
    for bounced in tally.bounces:
        across = [run for run in tally.missions if bounced.overlaps(run)]
        latencies = [run.latency_s for run in across if run.latency_s is not None]
        ends = collections.Counter(run.outcome for run in across)
        deaths = sum(
            bounced.at_s <= at <= bounced.at_s + bounced.outage_s + AFTER_BOUNCE_S
            for proc in procs
            for at in proc.deaths
        )
        table.add_row(
            f"{bounced.at_s / 60:.1f}",
            bounced.signal,
            bounced.exit,
            f"{bounced.outage_s:.1f}",
            str(len(across)),
            ", ".join(f"{count} {outcome}" for outcome, count in ends.items()),
            f"{max(latencies):.1f}" if latencies else "-",
            str(deaths),
        )
    return table


def missions_table(tally: Tally) -> Table:
    """Missions by how they ended, and results doubled or lost."""
    table = Table(
        "missions submitted", "completed", "failed", "still open", "results doubled", "results lost", title="Missions"
    )
    ended = [run.outcome for run in tally.missions]
    table.add_row(
        str(len(ended)),
        str(ended.count("completed")),
        str(sum(1 for outcome in ended if outcome not in ("completed", "open"))),
        str(ended.count("open")),
        str(sum(run.doubled for run in tally.missions)),
        str(sum(run.lost for run in tally.missions)),
    )
    return table


def latency_table(args: argparse.Namespace, tally: Tally) -> Table:
    """Mission latency per 5-minute window of submission, and how many of its missions were under way in a bounce."""
    table = Table(
        "window (minutes)", "missions", "across a bounce", "latency p50 s", "latency max s", title="Mission latency"
    )
    for start in range(0, args.minutes, 5):
        runs = [
            run for run in tally.missions if run.latency_s is not None and start * 60 <= run.at_s < (start + 5) * 60
        ]
        latencies = sorted(run.latency_s for run in runs)
        if latencies:
            across = sum(any(bounced.overlaps(run) for bounced in tally.bounces) for run in runs)
            table.add_row(
                f"{start}-{min(start + 5, args.minutes)}",
                str(len(runs)),
                str(across),
                f"{latencies[len(latencies) // 2]:.1f}",
                f"{latencies[-1]:.1f}",
            )
    return table


def garbage_table(tally: Tally) -> Table:
    """Garbage records written per kind."""
    table = Table(*GARBAGE, "total", title="Garbage records written")
    table.add_row(*(str(tally.garbage[kind]) for kind in GARBAGE), str(sum(tally.garbage.values())))
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=int, default=30)
    parser.add_argument("--warmup-minutes", type=float, default=5.0)
    parser.add_argument("--agents", type=int, default=4)
    parser.add_argument("--kill-every", type=float, default=20.0)
    parser.add_argument("--mission-every", type=float, default=5.0)
    parser.add_argument("--garbage-every", type=float, default=3.0)
    parser.add_argument("--bounce-every", type=float, default=300.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    logs.configure(logging.WARNING)  # this process's clients ride the bounces too: their repeats held back
    console = Console(width=160)
    settings = dataclasses.replace(Settings.from_env(), broker="kafka", bootstrap=None, redis_url=None, regions=1)
    work = Path(tempfile.mkdtemp(prefix="swarmlog-soak-"))
    with run_kafka_cluster(settings.cache_dir, nodes=1) as cluster, open_redis(settings) as redis:
        [node] = cluster.nodes
        settings = settings.with_services(bootstrap=cluster.bootstrap, redis_url=redis.url)
        asyncio.run(ensure_topics(settings))
        env = os.environ | {
            "SWARMLOG_BROKER": "kafka",
            "SWARMLOG_BOOTSTRAP": settings.bootstrap,
            "SWARMLOG_REDIS_URL": settings.redis_url or "",
            "SWARMLOG_REGIONS": "1",
        }
        procs = swarm(work, args.agents)
        try:
            for proc in procs:
                proc.start(env)
            console.print(f"soak for {args.minutes} min on {settings.bootstrap}; logs in {work}")
            tally = asyncio.run(soak(args, settings, node, procs, env))
        finally:
            process.stop_all([proc.child.popen for proc in procs if proc.child])
    for table in (
        memory_table(args, procs),
        bounce_table(tally, procs),
        missions_table(tally),
        latency_table(args, tally),
        garbage_table(tally),
    ):
        console.print(table)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
