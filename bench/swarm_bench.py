"""The swarm at scale on Apache Kafka: fleets of scripted agents, coordinators and the streams worker as processes.

One command per scenario (issue #12), each on its own Apache Kafka 4.1.2 (and Redis), every process a subprocess
(`swarmlog streams`, one `swarmlog coordinator` per region, `swarmlog fleet` hosts of scripted agents):
- a: the seed's mission, 96 agents (2 hosts of 48), 500 tasks × 2 replicas, consensus window 30 s, one final decision,
  log-normal generation latency (median 9 s, sigma 0.3);
- b: the seed's 2-agent baseline, the same mission shape with a 300 ms median and 40 tasks;
- c: 2,000 agents over 8 regions (8 hosts of 250) heartbeating at 1 Hz, one streams worker, 8 coordinators, a mission
  of 200 one-replica tasks in every region; then, once the streams worker's lag is back to heartbeats
  alone, kill -9 one host and time each of its agents' deaths.
Each scenario measures, next to its bound or baseline from the same run:
- makespan (MissionSubmitted → MissionCompleted occurred_at) / the list-scheduling bound: the mission's work (every
  completed WORK attempt, TaskStarted → TaskCompleted) / agents + the longest attempt (its tasks are independent,
  so that is the longest dependency chain) + the consensus phase (PhaseStarted CONSENSUS → ConsensusReached) + the
  final task's work; and over the strict lower bound max(work / agents, longest attempt) + consensus + final;
- dispatch idle: serial one-task missions, MissionSubmitted → TaskStarted, next to a raw aiokafka produce → consume
  round trip (the floor); under load: TaskAssigned → TaskStarted of the big missions;
- assignments/s (TaskAssigned over their span) per region and overall, and the first burst: MissionSubmitted → the
  TaskAssigned that gives the last free agent its task (what the coordinator does when every agent is free);
- the handoff gap: an agent's TaskCompleted → its next TaskStarted in the big mission;
- the streams worker's events/s in (end offsets) and committed by its group, and its consumer lag (end − committed),
  every second; the registry and heartbeat partitions count from offset 0 until the worker first commits them;
- RSS (peak, /proc VmHWM) and CPU seconds per process, and the machine's CPU busy share over the big missions;
- c only: kill -9 of one host → its AgentDeclaredDead readable on swarm.agents.registry − timeout, for each agent.
Run: .venv/bin/python bench/swarm_bench.py --scenario a [--scenario b --scenario c] [--agents N] [--hosts N]
     [--regions N] [--tasks N] [--replicas N] [--median-ms MS] [--sigma S] [--window-ms MS] [--answers N]
     [--idle-missions N]
a and b draw each scripted answer from 2 (replicas disagree about half the time, so the final ballot has candidates
and is voted on); c from 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import msgspec
from aiokafka import AIOKafkaConsumer
from aiokafka.admin import AIOKafkaAdminClient
from coordinator_bench import floor, journal  # bench/: the script's own directory
from rich.console import Console
from rich.table import Table
from streams_bench import Worker, cpu_seconds, end_offsets, percentile

from swarmlog import topics
from swarmlog.client import MissionClient
from swarmlog.envelope import now_ms
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentEnlisted,
    ConsensusReached,
    ConsensusTimedOut,
    MissionCompleted,
    MissionFailed,
    MissionSubmitted,
    PhaseStarted,
    TaskAssigned,
    TaskCompleted,
    TaskStarted,
)
from swarmlog.services import open_broker, open_redis
from swarmlog.settings import Settings
from swarmlog.streams.app.grouped import group_of

FINAL_TASK = "@final"  # the coordinator's id of a mission's final task (coordinator/state.py)
WORK, DECIDE = "work", "decision_making"
ENLIST_TIMEOUT_S = 300
LAG_TICK_S = 1.0
SETTLED_LAG_S, SETTLE_TIMEOUT_S = 3, 60
"""c kills a host once the worker's lag is at most 3 s of heartbeats (it commits every 2 s), or after a minute."""
BROKER = "kafka broker"


@dataclasses.dataclass(frozen=True)
class Scenario:
    """One shape of swarm and mission."""

    name: str
    agents: int
    hosts: int
    regions: int
    tasks: int  # per region
    replicas: int
    median_ms: float
    sigma: float
    window_ms: int
    kill: bool  # kill -9 one host at the end and time its agents' deaths
    answers: int  # distinct answers a scripted agent draws from: replicas disagree, and the ballot has candidates

    @property
    def per_host(self) -> int:
        """Agents per fleet host."""
        return self.agents // self.hosts


SCENARIOS = {
    "a": Scenario("a", 96, 2, 1, 500, 2, 9000, 0.3, 30_000, False, 2),
    "b": Scenario("b", 2, 1, 1, 40, 2, 300, 0.3, 30_000, False, 2),
    "c": Scenario("c", 2000, 8, 8, 200, 1, 500, 0.3, 30_000, True, 1),
}


@dataclasses.dataclass
class Process:
    """A swarmlog subprocess of the run, and what it used."""

    name: str
    pid: int
    popen: subprocess.Popen[bytes] | None = None  # None: not the bench's child (the broker)
    peak_rss_mb: float = 0.0
    cpu_s: float = 0.0
    load_cpu_s: float = 0.0  # CPU seconds over the big missions

    def sample(self) -> None:
        """Read its peak RSS and CPU time so far, while it runs."""
        try:
            status = Path(f"/proc/{self.pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                self.peak_rss_mb = int(line.split()[1]) / 1024
        self.cpu_s = cpu_seconds(self.pid) or self.cpu_s


@dataclasses.dataclass(frozen=True)
class Sample:
    """The streams worker's group at one moment: its committed offsets and their partitions' end offsets, summed, and
    the worker's CPU seconds."""

    at_s: float  # monotonic
    committed: int
    end: int
    cpu_s: float
    lag_by_topic: dict[str, int]


@dataclasses.dataclass
class Run:
    """What one scenario measured."""

    scenario: Scenario
    floor_ms: list[float]
    idle: list[tuple[MissionSubmitted, int]]  # serial one-task missions, each with its TaskStarted occurred_at
    submitted: dict[str, MissionSubmitted]  # big mission per region
    journals: dict[str, list[Event]]  # committed journal per region
    task_events: list[Event]
    processes: list[Process]
    lag: list[Sample]
    load_span: tuple[float, float]  # monotonic s of the big missions' start and end
    machine_busy: float  # the machine's CPU busy share over the big missions
    loadavg: tuple[float, float, float]
    broker_gc_s: float | None  # the broker JVM's GC time over the big missions
    deaths_ms: list[int] = dataclasses.field(default_factory=list)  # c: AgentDeclaredDead − kill − timeout
    killed: int = 0
    kill_lag: int | None = None  # c: the worker's lag, records, when the host was killed
    timeout_ms: int = 0


def brain_file(workdir: Path, scenario: Scenario) -> Path:
    """The scripted brain's JSON: log-normal latency with the scenario's median and sigma, and its answers."""
    path = workdir / f"brain-{scenario.name}.json"
    path.write_text(json.dumps({"median_ms": scenario.median_ms, "sigma": scenario.sigma, "answers": scenario.answers}))
    return path


def gc_seconds(pid: int) -> float | None:
    """A JVM's total garbage-collection time so far (`jstat -gcutil`, GCT), None without jstat or a JVM there."""
    jstat = shutil.which("jstat")
    if jstat is None or not pid:
        return None
    done = subprocess.run([jstat, "-gcutil", str(pid)], capture_output=True, text=True, check=False, timeout=30)
    try:
        return float(done.stdout.split()[-1])
    except (IndexError, ValueError):
        return None


def machine_ticks() -> tuple[int, int]:
    """(busy, total) CPU ticks of the whole machine so far (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def spawn(processes: list[Process], name: str, argv: list[str], env: dict[str, str], workdir: Path) -> None:
    """Start `python -m swarmlog <argv>` as a tracked process, logging to workdir/<name>.log."""
    with (workdir / f"{name}.log").open("ab") as log:
        popen = subprocess.Popen(
            [sys.executable, "-m", "swarmlog", *argv], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    processes.append(Process(name, popen.pid, popen))


@contextlib.contextmanager
def stopped_at_end(processes: list[Process], grace_s: float = 60) -> Iterator[None]:
    """SIGTERM every process still running when the block ends, all at once; SIGKILL those left after grace_s."""
    try:
        yield
    finally:
        running = [p.popen for p in processes if p.popen is not None and p.popen.poll() is None]
        for popen in running:
            popen.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for popen in running:
            try:
                popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()


def hosts_of(scenario: Scenario) -> list[tuple[str, str, int, str]]:
    """(host name, region, first slot, capabilities) of every fleet host: host h in region h % regions; the first
    host of each region also has decision_making (the final action's capability)."""
    return [
        (
            f"{scenario.name}{h}",
            f"region-{h % scenario.regions}",
            h * scenario.per_host,
            f"{WORK},{DECIDE}" if h < scenario.regions else WORK,
        )
        for h in range(scenario.hosts)
    ]


def mission(scenario: Scenario, region: str, tasks: int, replicas: int, title: str) -> dict[str, object]:
    """A mission of independent tasks needing `work`, a consensus window and a final decision."""
    return {
        "title": title,
        "region": region,
        "tasks": [
            {"task_id": f"t{n}", "prompt": f"task {n}", "required_capabilities": [WORK], "replicas": replicas}
            for n in range(tasks)
        ],
        "consensus": {"strategy": "MAJORITY", "window_ms": scenario.window_ms, "quorum": 0.5},
        "final_action": {"prompt": "decide", "required_capabilities": [DECIDE]},
    }


async def submit_now(client: MissionClient, producer: EventProducer, body: dict[str, object]) -> MissionSubmitted:
    """Validate and place a mission with the client, stamp it now, and send it on a warm producer (the client's own
    `produce` connects a producer per call, which a latency measure would count)."""
    event = msgspec.structs.replace(await client.placed(body), occurred_at=now_ms())
    await producer.send(topics.MISSIONS, event, key=event.mission_id)
    return event


@contextlib.asynccontextmanager
async def lag_sampler(settings: Settings, group: str, pid: int) -> AsyncIterator[list[Sample]]:
    """Every LAG_TICK_S: the group's committed offsets and the end offsets of the same partitions, each summed, and
    the CPU seconds of the worker (process `pid`). The partitions of liveness' inputs (registry, heartbeats) count
    from offset 0 until the worker commits them, so a worker that has not committed them yet shows their lag."""
    samples: list[Sample] = []
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap)
    probe = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, enable_auto_commit=False)
    await admin.start()
    await probe.start()

    async def sample() -> None:
        while True:
            await asyncio.sleep(LAG_TICK_S)
            with contextlib.suppress(Exception):  # the group may not exist yet, or rebalance
                committed = await admin.list_consumer_group_offsets(group)
                live = dict.fromkeys(liveness_inputs, 0)  # a partition the worker has not committed yet: 0
                live.update({tp: meta.offset for tp, meta in committed.items() if meta.offset >= 0})
                ends = await probe.end_offsets(list(live))
                by_topic: dict[str, int] = {}
                for tp, offset in live.items():
                    by_topic[tp.topic] = by_topic.get(tp.topic, 0) + ends[tp] - offset
                cpu = cpu_seconds(pid) or 0.0
                samples.append(Sample(time.monotonic(), sum(live.values()), sum(ends.values()), cpu, by_topic))

    liveness_inputs = list(await end_offsets(probe, [topics.REGISTRY, topics.HEARTBEATS]))
    sampler = asyncio.create_task(sample())
    try:
        yield samples
    finally:
        sampler.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        await probe.stop()
        await admin.close()


async def enlisted(watch: Collector, expected: dict[str, set[str]], processes: list[Process]) -> None:
    """Wait until every agent is enlisted in its region's journal; fail as soon as a process exits."""
    deadline = time.monotonic() + ENLIST_TIMEOUT_S

    def done() -> bool:
        seen = {(e.region, e.agent_id) for e in watch.named(AgentEnlisted)}
        return all((region, a) in seen for region, ids in expected.items() for a in ids)

    while not done():
        for process in processes:
            if process.popen is not None:
                assert process.popen.poll() is None, f"{process.name} exited with {process.popen.returncode}"
        assert time.monotonic() < deadline, f"agents not enlisted within {ENLIST_TIMEOUT_S} s"
        with contextlib.suppress(TimeoutError):
            await watch.wait_for(done, 2)


async def idle_dispatch(
    settings: Settings, scenario: Scenario, count: int, tasks: Collector, journal_watch: Collector
) -> list[tuple[MissionSubmitted, int]]:
    """`count` one-task missions, one at a time, round the regions, each with its TaskStarted occurred_at. A mission
    is sent once fewer than half the region's agents are busy with earlier ones, so the swarm stays idle."""
    client = MissionClient(settings, client_name="swarm-bench")
    per_region = scenario.agents // scenario.regions
    started: list[tuple[MissionSubmitted, int]] = []
    async with EventProducer(settings, client_id="swarm-bench-idle") as producer:
        for n in range(count):
            region = f"region-{n % scenario.regions}"
            busy = lambda region=region: sum(
                1
                for e, _ in started
                if e.region == region
                and not journal_watch.named(MissionCompleted, MissionFailed, mission_id=e.mission_id)
            )
            await journal_watch.wait_for(lambda busy=busy: busy() < max(1, per_region // 2), 120)
            event = await submit_now(
                client, producer, mission(scenario, region, 1, 1, f"idle {n}") | {"final_action": None}
            )
            await tasks.wait_for(lambda e=event: tasks.named(TaskStarted, mission_id=e.mission_id), 60)
            started.append((event, tasks.named(TaskStarted, mission_id=event.mission_id)[0].occurred_at))
    ids = [e.mission_id for e, _ in started]
    await journal_watch.wait_for(
        lambda: all(journal_watch.named(MissionCompleted, MissionFailed, mission_id=m) for m in ids), 120
    )
    return started


async def run_scenario(scenario: Scenario, args: argparse.Namespace, workdir: Path, console: Console) -> Run:
    """Start the scenario's services and processes, measure, stop."""
    with open_broker(Settings(broker="kafka")) as broker, open_redis(Settings()) as redis:
        settings = Settings(
            broker="kafka",
            bootstrap=broker.bootstrap,
            redis_url=redis.url,
            regions=scenario.regions,
            inbox_partitions=max(Settings().inbox_partitions, scenario.agents),
        )
        await ensure_topics(settings)
        console.print(f"[{scenario.name}] Apache Kafka at {broker.bootstrap}, Redis at {redis.url}")
        env = {
            **os.environ,
            "SWARMLOG_BROKER": "kafka",
            "SWARMLOG_BOOTSTRAP": broker.bootstrap,
            "SWARMLOG_REDIS_URL": redis.url,
            "SWARMLOG_REGIONS": str(settings.regions),
            "SWARMLOG_INBOX_PARTITIONS": str(settings.inbox_partitions),
            "SWARMLOG_STREAMS_LIVENESS_TIMEOUT_MS": str(args.timeout_ms),
        }
        worker = Worker(broker.bootstrap, "kafka", redis.url, workdir / f"streams-{scenario.name}")
        worker.env.update(env)
        await asyncio.to_thread(worker.start)
        assert worker.process is not None
        processes = [Process(BROKER, broker.pid or 0), Process("streams", worker.process.pid, worker.process)]
        try:
            with stopped_at_end(processes):
                return await measure(scenario, args, settings, env, workdir, processes, worker.app_id, console)
        finally:
            if worker.process.poll() is None:
                worker.stop()


async def measure(
    scenario: Scenario,
    args: argparse.Namespace,
    settings: Settings,
    env: dict[str, str],
    workdir: Path,
    processes: list[Process],
    group: str,
    console: Console,
) -> Run:
    """Coordinators and fleets up, idle dispatch, the big missions, the kill; what was measured."""
    regions = settings.region_names
    brain = brain_file(workdir, scenario)
    hosts = hosts_of(scenario)
    async with (
        Collector(settings, topics.JOURNAL, start="end") as journal_watch,
        Collector(
            settings, topics.TASK_EVENTS, start="end", keep=lambda e: isinstance(e, TaskStarted | TaskCompleted)
        ) as tasks,
        Collector(settings, topics.REGISTRY, start="end", keep=lambda e: isinstance(e, AgentDeclaredDead)) as deaths,
        lag_sampler(
            settings, group_of(group, "registry"), next(p.pid for p in processes if p.name == "streams")
        ) as lag,
    ):
        started = time.monotonic()
        for region in regions:
            argv = ["coordinator", "--region", region, "--data-dir", str(workdir / f"coordinator-{scenario.name}")]
            spawn(processes, f"coordinator-{region}", argv, env, workdir)
        for name, region, first_slot, capabilities in hosts:
            argv = ["fleet", "--agents", str(scenario.per_host), "--name", name, "--first-slot", str(first_slot)]
            argv += ["--brain", "scripted", "--model", str(brain), "--region", region, "--capabilities", capabilities]
            argv += ["--heartbeat-s", "1", "--data-dir", str(workdir / f"agents-{scenario.name}")]
            spawn(processes, f"fleet-{name}", argv, env, workdir)
        expected: dict[str, set[str]] = {}
        for name, region, _, _ in hosts:
            expected.setdefault(region, set()).update(f"{name}-{n}" for n in range(scenario.per_host))
        await enlisted(journal_watch, expected, processes)
        console.print(f"[{scenario.name}] {scenario.agents} agents enlisted after {time.monotonic() - started:.0f} s")
        floor_ms = await floor(settings.bootstrap or "", args.floor)
        idle = await idle_dispatch(settings, scenario, args.idle_missions, tasks, journal_watch)
        console.print(f"[{scenario.name}] idle dispatch: {len(idle)} missions")
        cpu_before = {p.name: cpu_seconds(p.pid) or 0.0 for p in processes}
        broker_pid = next(p.pid for p in processes if p.name == BROKER)
        gc_before = gc_seconds(broker_pid)
        busy_before, load_started = machine_ticks(), time.monotonic()
        client = MissionClient(settings, client_name="swarm-bench")
        async with EventProducer(settings, client_id="swarm-bench-load") as producer:
            submitted = {
                region: await submit_now(
                    client, producer, mission(scenario, region, scenario.tasks, scenario.replicas, f"load {region}")
                )
                for region in regions
            }
        ids = [e.mission_id for e in submitted.values()]
        work_s = scenario.tasks * scenario.replicas * scenario.median_ms / 1000 / (scenario.agents // scenario.regions)
        await journal_watch.wait_for(
            lambda: all(journal_watch.named(MissionCompleted, MissionFailed, mission_id=m) for m in ids),
            args.mission_timeout_s or 10 * work_s + scenario.window_ms / 1000 + 600,
        )
        load_ended, busy_after = time.monotonic(), machine_ticks()
        for process in processes:
            process.sample()
            process.load_cpu_s = process.cpu_s - cpu_before.get(process.name, 0.0)
        console.print(f"[{scenario.name}] big missions done in {load_ended - load_started:.0f} s")
        run = Run(
            scenario,
            floor_ms,
            idle,
            submitted,
            {region: await journal(settings, region) for region in regions},
            list(tasks.events),
            processes,
            lag,
            (load_started, load_ended),
            (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1]),
            os.getloadavg(),
            None if gc_before is None or (gc_after := gc_seconds(broker_pid)) is None else gc_after - gc_before,
            timeout_ms=args.timeout_ms,
        )
        if scenario.kill:
            await kill_host(run, hosts[-1][0], deaths, console)
        return run


async def kill_host(run: Run, host: str, deaths: Collector, console: Console) -> None:
    """kill -9 a fleet host; for each of its agents, its AgentDeclaredDead readable − kill − timeout (readable, not
    occurred_at: a death is decided for the newest moment the worker has folded up to, which a lagging worker
    reaches late)."""
    process = next(p for p in run.processes if p.name == f"fleet-{host}")
    agents = {f"{host}-{n}" for n in range(run.scenario.per_host)}
    settled_s = await steady(run.lag, bound=SETTLED_LAG_S * run.scenario.agents, timeout_s=SETTLE_TIMEOUT_S)
    run.kill_lag = run.lag[-1].end - run.lag[-1].committed if run.lag else None
    console.print(
        f"[{run.scenario.name}] worker lag {run.kill_lag} records after {settled_s:.0f} s of heartbeats alone"
    )
    killed_ms = now_ms()
    assert process.popen is not None
    process.popen.send_signal(signal.SIGKILL)
    process.popen.wait()
    console.print(f"[{run.scenario.name}] killed fleet-{host} ({len(agents)} agents)")
    with contextlib.suppress(TimeoutError):
        await deaths.wait_for(
            lambda: agents <= {e.agent_id for e in deaths.named(AgentDeclaredDead)}, run.timeout_ms / 1000 + 60
        )
    declared = {e.agent_id: deaths.read_ms[e.event_id] for e in deaths.named(AgentDeclaredDead) if e.agent_id in agents}
    run.deaths_ms = [at - killed_ms - run.timeout_ms for at in declared.values()]
    run.killed = len(agents)


async def steady(lag: list[Sample], bound: int, timeout_s: float) -> float:
    """Seconds waited (at most `timeout_s`) until the worker's sampled lag is at most `bound` records: the missions
    over, the swarm back to heartbeats alone."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if lag and lag[-1].at_s > started and lag[-1].end - lag[-1].committed <= bound:
            break
        await asyncio.sleep(LAG_TICK_S)
    return time.monotonic() - started


# ---- analysis ------------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Handoff:
    """An agent's TaskCompleted → its next TaskStarted, and → that task's TaskAssigned (the coordinator's part), ms."""

    gap: int
    to_assigned: int


@dataclasses.dataclass
class MissionResult:
    """One big mission's timings, ms."""

    region: str
    completed: bool
    makespan: int
    work_sum: int
    longest: int
    consensus: int  # PhaseStarted CONSENSUS → ConsensusReached / TimedOut
    consensus_to_final: int  # consensus decided → the final task started
    final: int
    agents: int
    under_load: list[int]  # TaskAssigned → TaskStarted
    assigned_at: list[int]  # TaskAssigned occurred_at of the WORK tasks, in order
    burst_ms: int  # MissionSubmitted → the TaskAssigned of the first `agents` assignments' last
    handoff: list[Handoff]

    @property
    def bound(self) -> float:
        """The list-scheduling bound: work / agents + the longest attempt + consensus + final."""
        return self.work_sum / self.agents + self.longest + self.consensus + self.final

    @property
    def lower_bound(self) -> float:
        """A strict lower bound: max(work / agents, the longest attempt) + consensus + final."""
        return max(self.work_sum / self.agents, self.longest) + self.consensus + self.final


def rate(stamps: list[int]) -> str:
    """Events per second over the span of their timestamps (ms), with the count and the span: a batch decided at
    once spans a millisecond, and its rate says nothing."""
    if len(stamps) < 2:
        return "–"
    span_ms = max(stamps[-1] - stamps[0], 1)
    return f"{(len(stamps) - 1) / (span_ms / 1000):,.1f} ({len(stamps)} in {span_ms / 1000:.1f} s)"


def mission_result(run: Run, region: str) -> MissionResult:
    """The timings of one region's big mission, from its committed journal and the task events."""
    submitted = run.submitted[region]
    mission_id = submitted.mission_id
    mine = [e for e in run.journals[region] if getattr(e, "mission_id", None) == mission_id]
    end = next((e for e in mine if isinstance(e, MissionCompleted | MissionFailed)), None)
    started = {attempt(e): e for e in run.task_events if isinstance(e, TaskStarted) and e.mission_id == mission_id}
    done = [e for e in run.task_events if isinstance(e, TaskCompleted) and e.mission_id == mission_id]
    work = {attempt(e): e.occurred_at - started[attempt(e)].occurred_at for e in done if attempt(e) in started}
    final = [ms for key, ms in work.items() if key[0] == FINAL_TASK]
    work_ms = [ms for key, ms in work.items() if key[0] != FINAL_TASK]
    consensus_at = next((e.occurred_at for e in mine if isinstance(e, PhaseStarted) and e.phase == "CONSENSUS"), None)
    decided_at = next((e.occurred_at for e in mine if isinstance(e, ConsensusReached | ConsensusTimedOut)), None)
    final_started = [e.occurred_at for key, e in started.items() if key[0] == FINAL_TASK]
    assigned = [e for e in mine if isinstance(e, TaskAssigned)]
    stamps = sorted(e.occurred_at for e in assigned if e.task_id != FINAL_TASK)
    under_load = [started[attempt(e)].occurred_at - e.occurred_at for e in assigned if attempt(e) in started]
    agents = run.scenario.agents // run.scenario.regions
    return MissionResult(
        region,
        isinstance(end, MissionCompleted),
        (end.occurred_at if end else now_ms()) - submitted.occurred_at,
        sum(work_ms),
        max(work_ms, default=0),
        (decided_at - consensus_at) if consensus_at and decided_at else 0,
        (final_started[0] - decided_at) if final_started and decided_at else 0,
        sum(final),
        agents,
        under_load,
        stamps,
        stamps[:agents][-1] - submitted.occurred_at if stamps else 0,
        handoffs(run.task_events, mission_id, {attempt(e): e.occurred_at for e in assigned}),
    )


def handoffs(events: list[Event], mission_id: str, assigned_at: dict[tuple[str, int, int], int]) -> list[Handoff]:
    """Per agent, each TaskCompleted → its next TaskStarted over the mission's WORK tasks, and the part of it until
    the coordinator assigned that next task."""
    by_agent: dict[str, list[Event]] = {}
    for e in events:
        if isinstance(e, TaskStarted | TaskCompleted) and e.mission_id == mission_id and e.task_id != FINAL_TASK:
            by_agent.setdefault(e.agent_id, []).append(e)
    gaps = []
    for timeline in by_agent.values():
        timeline.sort(key=lambda e: (e.occurred_at, isinstance(e, TaskStarted)))
        gaps += [
            Handoff(b.occurred_at - a.occurred_at, assigned_at.get(attempt(b), b.occurred_at) - a.occurred_at)
            for a, b in itertools.pairwise(timeline)
            if isinstance(a, TaskCompleted) and isinstance(b, TaskStarted)
        ]
    return gaps


def attempt(event: TaskAssigned | TaskStarted | TaskCompleted) -> tuple[str, int, int]:
    """The attempt an event is about: task, replica, attempt."""
    return event.task_id, event.replica, event.attempt


def pcts(values: list[float] | list[int], unit: str = "") -> tuple[str, str, str]:
    """p50, p99, max as cells; dashes when there are none."""
    if not values:
        return "–", "–", "–"
    return tuple(f"{v:,.0f}{unit}" for v in (percentile(values, 50), percentile(values, 99), max(values)))  # type: ignore[return-value]


def tables(run: Run) -> list[Table]:
    """The scenario's tables: the missions against their bound, dispatch against the floor, the streams worker,
    processes, and the kill."""
    s = run.scenario
    results = [mission_result(run, region) for region in run.submitted]
    shape = (
        f"{s.agents:,} agents ({s.hosts} host{'s' * (s.hosts > 1)}) in {s.regions} region{'s' * (s.regions > 1)}, "
        f"{s.tasks} tasks × {s.replicas} per region, latency median {s.median_ms:.0f} ms σ {s.sigma}, "
        f"window {s.window_ms / 1000:.0f} s, {s.answers} answer{'s' * (s.answers > 1)} per agent"
    )
    busy = (
        f"machine CPU busy {100 * run.machine_busy:.0f} % over the missions (2 cores, shared), "
        f"load average {run.loadavg[0]:.1f}"
    )
    mission_table = Table(title=f"scenario {s.name}: {shape}\n{busy}")
    mission_table.add_column("measure")
    for r in results:
        mission_table.add_column(r.region, justify="right")
    rows = {
        "completed": lambda r: "yes" if r.completed else "NO",
        "makespan, s": lambda r: f"{r.makespan / 1000:.1f}",
        "bound: work / agents + longest + consensus + final, s": lambda r: f"{r.bound / 1000:.1f}",
        "  work / agents, s": lambda r: f"{r.work_sum / r.agents / 1000:.1f}",
        "  longest attempt (the longest chain), s": lambda r: f"{r.longest / 1000:.1f}",
        "  consensus phase: PhaseStarted → decided, s": lambda r: f"{r.consensus / 1000:.2f}",
        "  final task's work, s": lambda r: f"{r.final / 1000:.1f}",
        "makespan / bound (target ≤ 1.10x)": lambda r: f"{r.makespan / r.bound:.3f}x",
        "makespan / max(work / agents, longest) + consensus + final": lambda r: f"{r.makespan / r.lower_bound:.3f}x",
        "consensus decided → final task started, ms": lambda r: f"{r.consensus_to_final:,}",
        "assignments/s over the mission": lambda r: rate(r.assigned_at),
        "first burst: submitted → min(agents, tasks) tasks assigned, ms": lambda r: f"{r.burst_ms:,}",
    }
    for label, cell in rows.items():
        mission_table.add_row(label, *(cell(r) for r in results))
    if len(results) > 1:
        overall = rate(sorted(at for r in results for at in r.assigned_at))
        mission_table.add_row("assignments/s, all regions", overall, *[""] * (len(results) - 1))

    dispatch = Table(title=f"scenario {s.name}: dispatch, next to a raw aiokafka produce → consume round trip")
    for column in ("measure", "p50 ms", "p99 ms", "max ms", "p50 × floor"):
        dispatch.add_column(column, justify="left" if column == "measure" else "right")
    base = percentile(run.floor_ms, 50)
    dispatch.add_row(
        "floor: raw aiokafka round trip",
        *(f"{v:.1f}" for v in (base, percentile(run.floor_ms, 99), max(run.floor_ms))),
        "1.0x",
    )
    load = [v for r in results for v in r.under_load]
    idle = [float(at - e.occurred_at) for e, at in run.idle]
    idle_assigned = {
        e.mission_id: e.occurred_at for events in run.journals.values() for e in events if isinstance(e, TaskAssigned)
    }
    idle_coordinator = [
        idle_assigned[e.mission_id] - e.occurred_at for e, _ in run.idle if e.mission_id in idle_assigned
    ]
    gaps = [h.gap for r in results for h in r.handoff]
    to_assigned = [h.to_assigned for r in results for h in r.handoff]
    for label, values in (
        (
            f"idle: MissionSubmitted → TaskStarted ({len(idle)} serial missions; target p50 ≤ 10, p99 ≤ 50)",
            idle,
        ),
        ("  of which MissionSubmitted → TaskAssigned (the coordinator)", idle_coordinator),
        (f"under load: TaskAssigned → TaskStarted ({len(load)} attempts)", load),
        (f"handoff: TaskCompleted → the agent's next TaskStarted ({len(gaps)})", gaps),
        ("  of which TaskCompleted → that next task's TaskAssigned (the coordinator)", to_assigned),
    ):
        cells = pcts(values)
        dispatch.add_row(label, *cells, f"{percentile(values, 50) / base:.1f}x" if values else "–")

    worker = Table(title=f"scenario {s.name}: the streams worker (liveness timeout {run.timeout_ms} ms)")
    for column in ("measure", "p50", "p99", "max"):
        worker.add_column(column, justify="left" if column == "measure" else "right")
    t0, t1 = run.load_span
    if len(run.lag) > 1:
        first, last = run.lag[0], run.lag[-1]
        span_s, cpu_s = max(last.at_s - first.at_s, 1e-3), max(last.cpu_s - first.cpu_s, 1e-3)
        arriving, folded = (last.end - first.end) / span_s, (last.committed - first.committed) / span_s
        per_cpu_s = folded * span_s / cpu_s
        rows = {
            f"events/s into its inputs over {span_s:.0f} s (end offsets: the pace to keep)": f"{arriving:,.0f}",
            "events/s folded, same span (committed offsets)": f"{folded:,.0f}",
            "worker CPU, same span, % of a core": f"{100 * cpu_s / span_s:.0f}",
            "events folded per worker CPU second": f"{per_cpu_s:,.0f}",
            "cores the arriving events need at that cost": f"{arriving / max(per_cpu_s, 1e-3):.2f}",
        }
        for label, value in rows.items():
            worker.add_row(label, value, "", "")
    worker.add_row(
        "consumer lag every second, records (end − committed)",
        *pcts([sample.end - sample.committed for sample in run.lag]),
    )
    at_end = next((sample for sample in reversed(run.lag) if sample.at_s <= t1), None)
    if at_end is not None:
        worst = sorted(at_end.lag_by_topic.items(), key=lambda item: -item[1])[:3]
        worker.add_row("  lag by topic as the missions ended: " + ", ".join(f"{t} {n:,}" for t, n in worst), "", "", "")
    if run.killed:
        within = sum(d <= 1000 for d in run.deaths_ms)
        worker.add_row(
            f"kill -9 of a host → AgentDeclaredDead readable − timeout, ms ({len(run.deaths_ms)}/{run.killed} declared)",
            *pcts(run.deaths_ms),
        )
        worker.add_row("declared within timeout + 1 s (target: all)", f"{within}/{run.killed}", "", "")
        worker.add_row(
            "the worker's lag when the host was killed, records",
            "–" if run.kill_lag is None else f"{run.kill_lag:,}",
            "",
            "",
        )

    gc = "" if run.broker_gc_s is None else f"; the broker's JVM spent {run.broker_gc_s:.1f} s of them in GC"
    procs = Table(
        title=f"scenario {s.name}: processes (RSS peak from /proc VmHWM; CPU user + system); the missions took "
        f"{t1 - t0:.0f} s{gc}"
    )
    for column in ("process", "peak RSS MB", "CPU s", "CPU s over the missions", "% of a core over the missions"):
        procs.add_column(column, justify="left" if column == "process" else "right")
    span = max(t1 - t0, 1e-3)
    for p in run.processes:
        procs.add_row(
            p.name, f"{p.peak_rss_mb:.0f}", f"{p.cpu_s:.1f}", f"{p.load_cpu_s:.1f}", f"{100 * p.load_cpu_s / span:.0f}"
        )
    return [mission_table, dispatch, worker, procs]


def scenario_of(name: str, args: argparse.Namespace) -> Scenario:
    """The named scenario with the flags given instead of its defaults."""
    base = SCENARIOS[name]
    flags = {
        f.name: getattr(args, f.name) for f in dataclasses.fields(Scenario) if getattr(args, f.name, None) is not None
    }
    return dataclasses.replace(base, **flags)


async def main(args: argparse.Namespace) -> None:
    console = Console(width=200)
    names = args.scenario or ["a"]
    with tempfile.TemporaryDirectory() as tmp:
        try:
            for name in names:
                scenario = scenario_of(name, args)
                run = await run_scenario(scenario, args, Path(tmp), console)
                for table in tables(run):
                    console.print(table)
        finally:
            if args.keep_logs:
                Path(args.keep_logs).mkdir(parents=True, exist_ok=True)
                for log in Path(tmp).glob("*.log"):
                    (Path(args.keep_logs) / log.name).write_bytes(log.read_bytes())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="a, b or c; repeatable")
    parser.add_argument("--agents", type=int, help="agents in all (split evenly over the hosts)")
    parser.add_argument("--hosts", type=int, help="fleet hosts")
    parser.add_argument("--regions", type=int, help="regions, one coordinator and one big mission each")
    parser.add_argument("--tasks", type=int, help="tasks of each region's big mission")
    parser.add_argument("--replicas", type=int, help="replicas of each task")
    parser.add_argument("--median-ms", dest="median_ms", type=float, help="scripted generation latency median")
    parser.add_argument("--sigma", type=float, help="scripted generation latency log-normal sigma")
    parser.add_argument("--window-ms", dest="window_ms", type=int, help="consensus window")
    parser.add_argument("--answers", type=int, help="distinct answers per scripted agent (1: replicas always agree)")
    parser.add_argument("--idle-missions", type=int, default=20, help="serial one-task missions on the idle swarm")
    parser.add_argument("--floor", type=int, default=100, help="raw aiokafka round trips (the floor)")
    parser.add_argument("--timeout-ms", type=int, default=5000, help="the streams worker's liveness timeout")
    parser.add_argument("--mission-timeout-s", type=float, help="give up on the big missions after this long")
    parser.add_argument("--keep-logs", help="copy the processes' logs to this folder at the end")
    asyncio.run(main(parser.parse_args()))
