"""Does cross-checking cut failures with a real model? The quality task set with replicas 1, then replicas 3.

Issue #13, part 4: the seed claimed cross-checking cut its failure rate from 12 % to 3.4 %. Each problem of
bench/quality/tasks.jsonl (100 short arithmetic, comparison, unit, fact, yes/no and word problems whose answers a
program checks: bench/quality/check.py) is one mission of one task needing `answering` (one step: answer or give up),
no final action, run by `--agents` agents on the model (the shipped SmolLM2-135M on llama.cpp by default) under
Tansu, Redis, the streams worker and a coordinator, all real processes (`swarmlog demo`'s swarm). Every agent samples
with its own seed (temperature 0.2). The set runs once per `--replicas` value on the same swarm:
- replicas 1: the mission's output is its one replica's answer;
- replicas 3: the coordinator cross-checks the task (TaskCrossChecked: outputs compared after normalising case and
  whitespace; a strict majority agrees, else one tie-breaker replica on a fourth agent, else the task is disputed and
  the mission's ballot, voted on by the agents, picks among its outputs). The mission's output is what that settles.
  `--checks VOTE` (or JUDGE) runs the replicated row again with that rule: outputs that differ go to a ballot of the
  agents that gave them (VOTE), or of one agent that did not work on the task (JUDGE), which picks one.
The mission's output (MissionCompleted.outputs[0]) is checked: a failure is a wrong answer or a malformed one (no
answer of the expected shape in the text, or no output: the task failed on every replica). Printed per row: tasks,
failures (wrong + malformed) with a 95 % Wilson interval, tokens (prompt + completion, every generation: replicas,
tie-breakers, votes; from TokensUsed), wall time (first submission → last mission ended), and the cross-checks'
outcomes; then each row against replicas 1 of the same model in the same run. The consensus window is long (600 s),
so no replica is cut off by a queue of 100 missions.
Run: .venv/bin/python bench/quality_bench.py [--tasks N] [--agents N] [--model PATH|NAME=PATH ...] [--replicas 1,3]
     [--checks EQUAL,VOTE,JUDGE] [--show]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from quality.check import Problem, Verdict, load, verdict, wilson  # bench/: the script's own directory
from rich.console import Console
from rich.table import Table
from swarm_bench import submit_now

from swarmlog import topics
from swarmlog.client import MissionClient
from swarmlog.commands.demo import swarm
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.connection import plaintext
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import (
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    MissionSubmitted,
    TaskCrossChecked,
    TokensUsed,
)
from swarmlog.services import open_services
from swarmlog.services.supervisor import unless_a_child_dies
from swarmlog.settings import Settings

CAPABILITY = "answering"
REGION = "region-0"
WINDOW_MS = 600_000
PROGRESS_S = 60
DEFAULT_MODEL = "smollm2-135m (default)"
ENDED = (MissionCompleted, MissionFailed, MissionRejected)
LABELS = {"EQUAL": "tie-breaker", "VOTE": "vote", "JUDGE": "judge"}  # a replicated row's label per cross-check rule


def label(replicas: int, check: str) -> str:
    """A row's replica count and, when replicated, how the replicas are compared: "1", "3 + vote"."""
    return f"{replicas} + {LABELS[check]}" if replicas > 1 else str(replicas)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """One problem's mission: the output it settled on, its verdict, the tokens it spent and its cross-checks."""

    problem: Problem
    output: str | None
    verdict: Verdict
    tokens: int
    checks: tuple[str, ...]  # TaskCrossChecked outcomes in order: AGREED, or TIE_BREAK/BALLOT then AGREED/DISPUTED


@dataclasses.dataclass(frozen=True)
class Row:
    """The task set on one model with one replica count."""

    model: str
    replicas: int
    check: str  # the task's cross-check rule (EQUAL, VOTE, JUDGE); moot with one replica
    outcomes: list[Outcome]
    wall_s: float

    @property
    def label(self) -> str:
        """The replica count and, when replicated, how the replicas are compared."""
        return label(self.replicas, self.check)

    def count(self, *verdicts: Verdict) -> int:
        """Problems with one of these verdicts."""
        return sum(outcome.verdict in verdicts for outcome in self.outcomes)

    @property
    def failures(self) -> int:
        """Wrong plus malformed answers."""
        return self.count(Verdict.WRONG, Verdict.MALFORMED)

    @property
    def rate(self) -> float:
        """The failure rate."""
        return self.failures / len(self.outcomes)

    @property
    def tokens(self) -> int:
        """Every generation's tokens over the set."""
        return sum(outcome.tokens for outcome in self.outcomes)

    @property
    def checks(self) -> collections.Counter[str]:
        """How the cross-checks ended (a tie-breaker or a ballot counts as TIE_BREAK or BALLOT and again as its final
        outcome)."""
        return collections.Counter(check for outcome in self.outcomes for check in outcome.checks)


def mission(problem: Problem, replicas: int, check: str) -> dict[str, object]:
    """One problem as a mission: one task needing `answering`, one step, `replicas` replicas compared by `check` (a
    judge needs `answering` too), no final action."""
    task: dict[str, object] = {
        "task_id": problem.id,
        "prompt": problem.prompt,
        "required_capabilities": [CAPABILITY],
        "replicas": replicas,
        "max_steps": 1,
        "check": check,
    }
    if check == "JUDGE":
        task["judge"] = CAPABILITY
    return {
        "title": f"quality {problem.id} × {replicas} {check}",
        "region": REGION,
        "tasks": [task],
        "consensus": {"strategy": "MAJORITY", "window_ms": WINDOW_MS, "quorum": 0.5},
    }


def outcome(problem: Problem, submitted: MissionSubmitted, journal: Collector, usage: Collector) -> Outcome:
    """What the problem's mission settled on, read from its journal and its TokensUsed."""
    mission_id = submitted.mission_id
    ended = journal.named(*ENDED, mission_id=mission_id)[0]
    output = ended.outputs[0] if isinstance(ended, MissionCompleted) and ended.outputs else None
    return Outcome(
        problem,
        output,
        verdict(problem, output),
        sum(e.prompt_tokens + e.completion_tokens for e in usage.named(TokensUsed, mission_id=mission_id)),
        tuple(e.outcome for e in journal.named(TaskCrossChecked, mission_id=mission_id)),
    )


async def run_set(
    settings: Settings,
    model: str,
    problems: Sequence[Problem],
    replicas: int,
    check: str,
    timeout_s: float,
    say: Callable[[str], None],
) -> Row:
    """Submit every problem's mission at once and wait until each has ended, saying every minute how many have; the
    row they make."""
    client = MissionClient(settings, client_name="quality-bench")
    async with (
        Collector(settings, topics.JOURNAL, start="end") as journal,
        Collector(settings, topics.USAGE, start="end") as usage,
        EventProducer(settings, client_id="quality-bench") as producer,
    ):
        started = time.monotonic()
        submitted = [await submit_now(client, producer, mission(problem, replicas, check)) for problem in problems]
        ids = {event.mission_id for event in submitted}

        def ended() -> set[str]:
            return ids & {e.mission_id for e in journal.named(*ENDED)}

        deadline = started + timeout_s
        while len(ended()) < len(ids):
            with contextlib.suppress(TimeoutError):
                await journal.wait_for(lambda: len(ended()) == len(ids), min(PROGRESS_S, deadline - time.monotonic()))
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{len(ended())} of {len(ids)} missions ended within {timeout_s:.0f} s")
            say(f"[{model}] replicas {label(replicas, check)}: {len(ended())}/{len(ids)} missions ended")
        wall_s = time.monotonic() - started
        await asyncio.sleep(1)  # the last TokensUsed, written with the last results, reach the usage collector
        outcomes = [outcome(p, s, journal, usage) for p, s in zip(problems, submitted, strict=True)]
        return Row(model, replicas, check, outcomes, wall_s)


def rows_of(args: argparse.Namespace) -> list[tuple[int, str]]:
    """The rows to run, as (replicas, check): one replica once, more once per cross-check rule."""
    return [(replicas, check) for replicas in args.replicas for check in (args.checks if replicas > 1 else ["EQUAL"])]


async def run_model(
    name: str, path: str | None, problems: Sequence[Problem], args: argparse.Namespace, console: Console
) -> list[Row]:
    """Tansu, Redis, the streams worker, a coordinator and the agents on one model; the set once per replica count."""
    settings = plaintext(
        dataclasses.replace(Settings.from_env(broker="tansu"), bootstrap=None, redis_url=None, regions=1)
    )
    work = Path(tempfile.mkdtemp(prefix="swarmlog-quality-"))
    agents = [(f"agent-{n}", CAPABILITY) for n in range(args.agents)]
    rows = []
    with open_services(settings) as services:
        settings = settings.with_services(bootstrap=services.broker.bootstrap, redis_url=services.redis.url)
        await ensure_topics(settings)
        with swarm(settings, work, "llamacpp", path, agents) as children:
            console.print(f"[{name}] {args.agents} agents on {services.broker.bootstrap}; logs in {work}")
            for replicas, check in rows_of(args):
                row = await unless_a_child_dies(
                    run_set(settings, name, problems, replicas, check, args.timeout_s, console.print),
                    [*services.children, *children],
                )
                console.print(
                    f"[{name}] replicas {row.label}: {row.failures}/{len(row.outcomes)} failed, {row.wall_s:.0f} s"
                )
                rows.append(row)
    return rows


def percent(value: float) -> str:
    """A share as a percentage with one decimal."""
    return f"{100 * value:.1f} %"


def table(rows: Sequence[Row]) -> Table:
    """The failure rates, tokens and wall times, each row against replicas 1 of its model from the same run."""
    result = Table(
        "model",
        "replicas",
        "tasks",
        "wrong",
        "malformed",
        "failure rate (95 % Wilson)",
        "tokens",
        "tokens / task",
        "wall s",
        "cross-checks: agreed / tie-breakers / ballots / disputed",
        "vs replicas 1: rate; tokens; wall",
        title="Cross-checking on the quality task set (bench/quality/tasks.jsonl)",
    )
    baselines = {row.model: row for row in rows if row.replicas == 1}
    for row in rows:
        low, high = wilson(row.failures, len(row.outcomes))
        base = baselines.get(row.model)
        checks = row.checks
        result.add_row(
            row.model,
            row.label,
            str(len(row.outcomes)),
            str(row.count(Verdict.WRONG)),
            str(row.count(Verdict.MALFORMED)),
            f"{percent(row.rate)} ({percent(low)} – {percent(high)})",
            f"{row.tokens:,}",
            f"{row.tokens / len(row.outcomes):.0f}",
            f"{row.wall_s:.0f}",
            f"{checks['AGREED']} / {checks['TIE_BREAK']} / {checks['BALLOT']} / {checks['DISPUTED']}"
            if row.replicas > 1
            else "–",
            "baseline"
            if base is None or base is row
            else f"{100 * (row.rate - base.rate):+.1f} points; {row.tokens / base.tokens:.2f}x; "
            f"{row.wall_s / base.wall_s:.2f}x",
        )
    return result


def answers(rows: Sequence[Row]) -> Table:
    """Every problem's settled output and verdict, per row (--show)."""
    result = Table("task", "expected", *[f"{row.model} × {row.label}" for row in rows], title="Answers")
    for index, problem in enumerate(rows[0].outcomes):
        cells = [f"{row.outcomes[index].verdict.value}: {row.outcomes[index].output!r:.60}" for row in rows]
        result.add_row(problem.problem.id, problem.problem.answer, *cells)
    return result


def by_kind(rows: Sequence[Row]) -> Table:
    """Failures per kind of problem, per row: which kinds the model can do at all."""
    kinds = list(dict.fromkeys(outcome.problem.kind for outcome in rows[0].outcomes))
    result = Table("model", "replicas", *kinds, title="Failures by kind of problem (failed / tasks)")
    for row in rows:
        cells = []
        for kind in kinds:
            of_kind = [outcome for outcome in row.outcomes if outcome.problem.kind == kind]
            cells.append(f"{sum(outcome.verdict is not Verdict.RIGHT for outcome in of_kind)}/{len(of_kind)}")
        result.add_row(row.model, row.label, *cells)
    return result


def rules(text: str) -> list[str]:
    """A comma-separated list of cross-check rules, each EQUAL, VOTE or JUDGE."""
    named = text.upper().split(",")
    unknown = set(named) - set(LABELS)
    if unknown:
        raise argparse.ArgumentTypeError(f"{', '.join(sorted(unknown))}: a check is one of {', '.join(LABELS)}")
    return named


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=None, help="the first N problems of the set (default: all 100)")
    parser.add_argument("--agents", type=int, default=4, help="agents (a tie-breaker needs a 4th; default 4)")
    parser.add_argument(
        "--model", action="append", default=[], help="a GGUF as PATH or NAME=PATH (repeatable; default: SmolLM2-135M)"
    )
    parser.add_argument(
        "--replicas", type=lambda text: [int(n) for n in text.split(",")], default=[1, 3], help="e.g. 1,3"
    )
    parser.add_argument(
        "--checks",
        type=rules,
        default=["EQUAL"],
        help="how replicas are compared, one row each: EQUAL (a tie-breaker), VOTE, JUDGE (default EQUAL)",
    )
    parser.add_argument("--timeout-s", type=float, default=3600, help="give up on a row after this long")
    parser.add_argument("--show", action="store_true", help="print every problem's answer per row")
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None, console: Console | None = None) -> list[Row]:
    """Run the bench and print its table; the rows."""
    args = parse(argv)
    console = console or Console(width=220)
    problems = load()[: args.tasks]
    models = [spec.split("=", 1) if "=" in spec else [Path(spec).stem, spec] for spec in args.model]
    rows = []
    for name, path in models or [[DEFAULT_MODEL, None]]:
        rows += await run_model(name, path, problems, args, console)
    if args.show:
        console.print(answers(rows))
    console.print(by_kind(rows))
    console.print(table(rows))
    return rows


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
