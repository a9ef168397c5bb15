"""Agent-loop completion tokens/s on llama.cpp next to the raw brain's in the same run, and heartbeat jitter.

Opens the llama.cpp brain the agents use (SmolLM2-135M, the agent's seed) once. Baseline: N back-to-back
generations of the tasks' first-step prompts with the action schema, straight on the brain. Then the same brain
inside a real agent shell (`swarmlog.actors.shell.agent.Agent`, in process) on the embedded Tansu broker and Redis: the
N TaskAssigned commands are written into its inbox slot at once and one consumer (500 ms long polls) collects its
events; the agent runs through the raw passes too (idle, heartbeating), so both sides share the background.
The loop's tokens/s is TokensUsed completion tokens over the span first TaskStarted → last TaskCompleted (every
inbox poll, write and checkpoint between generations included).
Raw and loop passes alternate in rounds (raw-loop, loop-raw, ...) over the same prompts, so drift from other load
on the machine falls on both sides; with one step per task both produce the same tokens (same seed and prompt).
"Outside the step loop" is the loop's span minus the tasks' own latency_ms: inbox poll, decide, the TaskStarted and
closing writes, the checkpoint, i.e. what the agent adds that does not depend on the model's speed.
Heartbeat jitter: the intervals between AgentHeartbeat occurred_at against the configured period, while idle
(before the tasks) and while the model generates.
Run: .venv/bin/python bench/agent_bench.py [--tasks N] [--rounds N] [--max-steps N] [--heartbeat-s S] [--idle-s S]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import tempfile
import time
import uuid
import zlib
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swarmlog import topics
from swarmlog.actors.brains import Brain, open_brain
from swarmlog.actors.domain import Order
from swarmlog.actors.shell.agent import AgentProcess
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.actors.steps import Run
from swarmlog.envelope import now_ms, stamp
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import AgentHeartbeat, TaskAssigned, TaskCompleted, TaskFailed, TaskStarted, TokensUsed
from swarmlog.services import open_broker, open_redis
from swarmlog.settings import Settings
from swarmlog.topics import catalog

AGENT_ID = "bench-agent-0"
SLOT = 0
# Representative work: the kind of tasks examples/ and the demo give agents.
PROMPTS = (
    "Write a Python function slugify(text) that lowercases text and joins words with dashes.",
    "Review this code and list one concrete improvement: def add(a, b): return a+b",
    "Write one pytest test for a function is_even(n) that returns True for even numbers.",
    "Write the release note for version 1.2 of a package that adds a slugify() helper.",
    "Explain in two sentences why an event log makes a replay of state possible.",
    "Give the shell command that lists the ten largest files under the current directory.",
    "Decide whether to ship a release whose tests all pass but whose changelog is empty; one reason.",
    "Summarise what a Kafka consumer group does, for a new engineer, in one paragraph.",
    "Write a SQL query that counts orders per customer in a table orders(customer_id, total).",
    "Name one risk of retrying a non-idempotent HTTP request and how to avoid it.",
)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100), nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def assigned(mission_id: str, n: int, max_steps: int, offset: int = 0) -> TaskAssigned:
    """The n-th TaskAssigned of a round to the bench agent, as the coordinator would write it; rounds rotate prompts."""
    return stamp(
        TaskAssigned,
        producer="coordinator:region-0",
        correlation_id=mission_id,
        mission_id=mission_id,
        task_id=f"t{n}",
        replica=0,
        attempt=1,
        agent_id=AGENT_ID,
        slot=SLOT,
        score=1.0,
        prompt=PROMPTS[(offset + n) % len(PROMPTS)],
        inputs={},
        required_capabilities=[],
        max_steps=max_steps,
    )


def first_step(event: TaskAssigned) -> Run:
    """The run the agent starts for a TaskAssigned: its prompt and schema are the first generation's."""
    return Run(Order.of(event), AGENT_ID, started_ms=0)


async def raw(brain: Brain, tasks: list[TaskAssigned], max_tokens: int) -> tuple[list[float], list[int], float]:
    """Each task's first step straight on the brain, back to back: seconds and completion tokens each, and the span."""
    seconds, tokens = [], []
    started = time.perf_counter()
    for event in tasks:
        run = first_step(event)
        at = time.perf_counter()
        generation = await brain.generate(run.prompt(), run.schema, max_tokens)
        seconds.append(time.perf_counter() - at)
        tokens.append(generation.completion_tokens)
    return seconds, tokens, time.perf_counter() - started


def agent_events(settings: Settings) -> Collector:
    """The agent's task, token and heartbeat events, collected in the background from the start of the topics."""
    topic_of = {name: spec.name for spec in catalog(settings) for name in spec.events}
    topics = sorted({topic_of[kind.name] for kind in (TaskCompleted, TokensUsed, AgentHeartbeat)})
    return Collector(settings, *topics, keep=lambda event: getattr(event, "agent_id", None) == AGENT_ID)


@dataclasses.dataclass
class Measured:
    """Both sides, summed over the rounds."""

    raw_seconds: list[float] = dataclasses.field(default_factory=list)  # per generation
    raw_tokens: list[int] = dataclasses.field(default_factory=list)
    raw_spans: list[float] = dataclasses.field(default_factory=list)  # s, per round
    loop_spans: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # first TaskStarted, last closed, ms
    missions: list[str] = dataclasses.field(default_factory=list)
    idle: tuple[int, int] = (0, 0)  # the idle window before the first round, ms


async def loop_round(
    settings: Settings, watch: Collector, round_: int, args: argparse.Namespace, measured: Measured
) -> None:
    """Give the running agent every task at once and wait until it closed them all."""
    mission_id = f"bench-{uuid.uuid4().hex[:8]}-r{round_}"
    async with EventProducer(settings, client_id="bench-coordinator") as producer:
        for n in range(args.tasks):
            event = assigned(mission_id, n, args.max_steps, round_ * args.tasks)
            await producer.send(topics.INBOX, event, key=AGENT_ID, partition=SLOT)
    closed = lambda: watch.named(TaskCompleted, TaskFailed, mission_id=mission_id)
    await watch.wait_for(lambda: len(closed()) >= args.tasks, args.timeout_s)
    started = min(e.occurred_at for e in watch.named(TaskStarted, mission_id=mission_id))
    ended = max(e.occurred_at for e in closed())
    measured.loop_spans.append((started, ended))
    measured.missions.append(mission_id)


async def measure(
    settings: Settings, brain: Brain, args: argparse.Namespace, workdir: Path
) -> tuple[Measured, Collector]:
    """Idle first (jitter baseline), then rounds of raw and loop passes over the same prompts, ABBA."""
    config = AgentConfig(
        agent_id=AGENT_ID,
        capabilities=("coding",),
        brain="llamacpp",
        model=None,
        gpu=None,
        node="bench",
        region="region-0",
        slot=SLOT,
        data_dir=workdir,
        heartbeat_s=args.heartbeat_s,
    )
    measured = Measured()
    agent = AgentProcess(config, settings, brain)
    async with agent_events(settings) as watch:
        running = asyncio.create_task(agent.run())
        try:
            idle_from = now_ms()
            await asyncio.sleep(args.idle_s)  # registered and heartbeating, nothing to do
            measured.idle = (idle_from, now_ms())
            for round_ in range(args.rounds):
                passes = ("raw", "loop") if round_ % 2 == 0 else ("loop", "raw")  # ABBA: drift cancels out
                for side in passes:
                    assert not running.done(), running
                    if side == "raw":
                        tasks = [assigned("raw", n, args.max_steps, round_ * args.tasks) for n in range(args.tasks)]
                        seconds, tokens, span = await raw(brain, tasks, args.max_tokens)
                        measured.raw_seconds += seconds
                        measured.raw_tokens += tokens
                        measured.raw_spans.append(span)
                    else:
                        await loop_round(settings, watch, round_, args, measured)
            await asyncio.sleep(args.heartbeat_s * 2)  # the last heartbeats in
        finally:
            agent.stop()
            with contextlib.suppress(Exception):
                await running
    return measured, watch


def jitter(beats: list[int], period_ms: float) -> tuple[int, float, float, float]:
    """Heartbeat intervals: how many, and |interval - period| p50, p99, max in ms."""
    deviations = [abs(b - a - period_ms) for a, b in itertools.pairwise(beats)]
    if not deviations:
        return 0, float("nan"), float("nan"), float("nan")
    return len(deviations), percentile(deviations, 50), percentile(deviations, 99), max(deviations)


def report(console: Console, measured: Measured, watch: Collector, args: argparse.Namespace) -> float:
    """The tables; returns the overhead in %."""
    missions = set(measured.missions)
    closed: list[TaskCompleted | TaskFailed] = [
        *(e for e in watch.named(TaskCompleted) if e.mission_id in missions),
        *(e for e in watch.named(TaskFailed) if e.mission_id in missions),
    ]
    used = [e for e in watch.named(TokensUsed) if e.mission_id in missions]
    loop_tokens = sum(e.completion_tokens for e in used)
    raw_span_s = sum(measured.raw_spans)
    span_s = sum(end - start for start, end in measured.loop_spans) / 1000
    raw_rate, loop_rate = sum(measured.raw_tokens) / raw_span_s, loop_tokens / span_s
    overhead = (1 - loop_rate / raw_rate) * 100
    per_task = [e.latency_ms for e in closed]
    raw_ms = [s * 1000 for s in measured.raw_seconds]

    table = Table(
        title=f"llama.cpp SmolLM2-135M, {args.rounds} rounds × {args.tasks} tasks (max_steps="
        f"{args.max_steps}): raw brain vs the agent loop on Tansu + Redis"
    )
    for column in ("measure", "raw brain (baseline)", "agent loop", "loop / raw"):
        table.add_column(column, justify="left" if column == "measure" else "right")
    table.add_row("generations", str(len(raw_ms)), str(len(used)), "")
    table.add_row("completion tokens", f"{sum(measured.raw_tokens):,}", f"{loop_tokens:,}", "")
    table.add_row("span, s", f"{raw_span_s:.1f}", f"{span_s:.1f}", f"{span_s / raw_span_s:.2f}x")
    table.add_row("completion tokens/s", f"{raw_rate:.1f}", f"{loop_rate:.1f}", f"{loop_rate / raw_rate:.2f}x")
    table.add_row(
        "per task p50, ms",
        f"{percentile(raw_ms, 50):,.0f}",
        f"{percentile(per_task, 50):,.0f}",
        f"{percentile(per_task, 50) / percentile(raw_ms, 50):.2f}x",
    )
    table.add_row(
        "per task p99, ms",
        f"{percentile(raw_ms, 99):,.0f}",
        f"{percentile(per_task, 99):,.0f}",
        f"{percentile(per_task, 99) / percentile(raw_ms, 99):.2f}x",
    )
    latency = {(e.mission_id, e.task_id): e.latency_ms for e in closed}
    paired = [
        latency[mission_id, f"t{n}"] / raw_ms[round_ * args.tasks + n]
        for round_, mission_id in enumerate(measured.missions)
        for n in range(args.tasks)
    ]
    table.add_row("same prompt: loop task / raw generation, p50", "", "", f"{percentile(paired, 50):.2f}x")
    by_round = []
    for round_, (mission_id, (start, end)) in enumerate(zip(measured.missions, measured.loop_spans, strict=True)):
        tokens = sum(e.completion_tokens for e in used if e.mission_id == mission_id)
        raw_tokens = sum(measured.raw_tokens[round_ * args.tasks : (round_ + 1) * args.tasks])
        by_round.append((tokens / (end - start) * 1000) / (raw_tokens / measured.raw_spans[round_]))
    table.add_row("loop / raw tokens/s, each round", "", "", " ".join(f"{r:.2f}" for r in by_round))
    outside = span_s - sum(per_task) / 1000
    table.add_row("loop span outside the step loop, s (share)", "", f"{outside:.2f} ({outside / span_s:.1%})", "")
    table.add_row("overhead (1 - loop / raw tokens/s)", "", f"{overhead:.1f} %", "")
    console.print(table)
    gaps = []
    for mission_id in measured.missions:
        started = sorted(e.occurred_at for e in watch.named(TaskStarted, mission_id=mission_id))
        ended = sorted(e.occurred_at for e in watch.named(TaskCompleted, TaskFailed, mission_id=mission_id))
        gaps += [b - a for a, b in zip(ended, started[1:], strict=False)]
    console.print(
        f"between tasks (TaskCompleted → next TaskStarted): p50 {percentile(gaps, 50)} ms, "
        f"max {max(gaps)} ms; {sum(isinstance(e, TaskFailed) for e in closed)} of {len(closed)} tasks failed"
    )

    beats = sorted(e.occurred_at for e in watch.named(AgentHeartbeat))
    period = args.heartbeat_s * 1000
    within = lambda window: [b for b in beats if window[0] <= b <= window[1]]
    table = Table(title=f"heartbeat jitter: |interval - {period:.0f} ms| between AgentHeartbeat occurred_at")
    for column in ("while", "intervals", "p50 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="left" if column == "while" else "right")
    series = {
        "idle (baseline)": [intervals(within(measured.idle))],
        "generating (loop rounds)": [intervals(within(span)) for span in measured.loop_spans],
    }
    for label, parts in series.items():
        deviations = [abs(gap - period) for part in parts for gap in part]
        if deviations:
            table.add_row(
                label,
                str(len(deviations)),
                f"{percentile(deviations, 50):.0f}",
                f"{percentile(deviations, 99):.0f}",
                f"{max(deviations):.0f}",
            )
    console.print(table)
    return overhead


def intervals(beats: list[int]) -> list[int]:
    """The gaps between consecutive heartbeats, ms."""
    return [b - a for a, b in itertools.pairwise(beats)]


async def main(args: argparse.Namespace) -> None:
    console = Console(width=120)
    # The agent's own seed (run_agent's), so raw and loop sample the same way.
    brain = open_brain("llamacpp", None, None, seed=zlib.crc32(AGENT_ID.encode()))
    try:
        warm = first_step(assigned("warm", len(PROMPTS) - 1, args.max_steps))
        await brain.generate(warm.prompt(), warm.schema, args.max_tokens)  # load pages and grammar machinery once
        with (
            open_broker(Settings(broker="tansu")) as broker,
            open_redis(Settings()) as redis,
            tempfile.TemporaryDirectory() as tmp,
        ):
            settings = Settings(broker="tansu").with_services(bootstrap=broker.bootstrap, redis_url=redis.url)
            await ensure_topics(settings)
            console.print(
                f"Tansu at {broker.bootstrap}, Redis at {redis.url}; {args.rounds} rounds of "
                f"{args.tasks} raw generations and {args.tasks} agent tasks"
            )
            measured, watch = await measure(settings, brain, args, Path(tmp))
    finally:
        brain.close()
    overhead = report(console, measured, watch, args)
    console.print(f"overhead {overhead:.1f} % ({'within' if overhead <= 10 else 'over'} the 10 % target)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4, help="tasks per round (raw: generations per round)")
    parser.add_argument("--rounds", type=int, default=4, help="raw/loop rounds, alternating which side goes first")
    parser.add_argument(
        "--max-steps",
        type=int,
        default=1,
        help="steps per task (1: one generation each, so raw and loop do the same work)",
    )
    parser.add_argument("--max-tokens", type=int, default=AgentConfig.max_tokens, help="per generation")
    parser.add_argument("--heartbeat-s", type=float, default=AgentConfig.heartbeat_s, help="heartbeat period")
    parser.add_argument("--idle-s", type=float, default=10.0, help="idle time before the tasks (jitter baseline)")
    parser.add_argument("--timeout-s", type=float, default=600.0, help="give up on a round after this long")
    asyncio.run(main(parser.parse_args()))
