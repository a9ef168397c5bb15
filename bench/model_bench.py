"""Which small GGUF model answers the demo's tasks: correctness and completion tokens/s of each, on this machine.

Every model runs the demo mission's stages through the agent's own prompts, action schema and llama.cpp brain
(constrained decoding, the agent's seed): write slugify(), review it, test it, vote between two answers, decide
ship or hold. Checks, per stage: the code defines a slugify that passes slugify("Hello World") == "hello-world"
(run in a child process); the review and the test name slugify; the vote names a candidate; the decision says ship
or hold. The baseline is SmolLM2-135M, today's default, measured in the same run.
Run: .venv/bin/python bench/model_bench.py [--model NAME=PATH ...] [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swarmlog.actors.actions import VOTE, Action, action_schema, parse_action
from swarmlog.actors.brains.llamacpp import LlamaCppBrain, default_model
from swarmlog.actors.prompts import task_prompt, vote_prompt
from swarmlog.commands.demo import MISSION

TASKS = {task["task_id"]: task["prompt"] for task in MISSION["tasks"]}
FINAL = MISSION["final_action"]["prompt"]
CHECK_SLUGIFY = "ns = {}\nexec(open(0).read(), ns)\nassert ns['slugify']('Hello World') == 'hello-world'\n"


def code_of(text: str) -> str:
    """The Python code in an answer: a fenced block when there is one, else the whole text."""
    fenced = re.search(r"```(?:python)?\n(.*?)```", text, re.S)
    return fenced.group(1) if fenced else text


def slugify_works(text: str) -> bool:
    """Whether the answer's code defines a slugify that lowercases and joins words with dashes."""
    try:
        run = subprocess.run(
            [sys.executable, "-c", CHECK_SLUGIFY],
            input=code_of(text),
            text=True,
            capture_output=True,
            timeout=10,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return False
    return run.returncode == 0


async def one_mission(brain: LlamaCppBrain) -> tuple[dict[str, bool], dict[str, str], int, float]:
    """The demo's stages on one brain: which checks passed, the answers, completion tokens and seconds generating."""
    answers: dict[str, str] = {}
    tokens, seconds = 0, 0.0

    async def ask(prompt: str, schema: dict) -> Action | None:
        nonlocal tokens, seconds
        started = time.monotonic()
        generation = await brain.generate(prompt, schema, 428)
        seconds += time.monotonic() - started
        tokens += generation.completion_tokens
        action = parse_action(
            generation.text,
            tuple(option["properties"]["action"]["const"] for option in schema["oneOf"]),
            _candidates(schema),
        )
        return action if isinstance(action, Action) else None

    schema = action_schema(("answer",))
    for stage, inputs in (("generate", {}), ("review", {"generate": "generate"}), ("test", {"review": "review"})):
        action = await ask(
            task_prompt(TASKS[stage], {name: answers.get(source, "") for name, source in inputs.items()}), schema
        )
        answers[stage] = action.content if action else ""
    ballot = {"test/0": answers["test"], "test/1": answers["generate"]}
    vote = await ask(vote_prompt(ballot, TASKS["test"]), action_schema((VOTE,), tuple(ballot)))
    answers["vote"] = vote.candidate_id if vote and vote.candidate_id else ""
    final = await ask(task_prompt(FINAL, {"test": answers["test"]}), schema)
    answers["final"] = final.content if final else ""
    checks = {
        "slugify runs": slugify_works(answers["generate"]),
        "review names it": "slugify" in answers["review"].lower(),
        "test names it": "slugify" in answers["test"].lower() and "assert" in answers["test"],
        "vote valid": answers["vote"] in ballot,
        "ship or hold": bool(re.search(r"\b(ship|hold)\b", answers["final"].lower())),
    }
    return checks, answers, tokens, seconds


def _candidates(schema: dict) -> tuple[str, ...]:
    candidate = schema["oneOf"][0]["properties"].get("candidate_id", {})
    return tuple(candidate.get("enum", ()))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", default=[], help="NAME=PATH of a GGUF to compare")
    parser.add_argument("--rounds", type=int, default=3, help="missions per model, each with its own seed")
    parser.add_argument("--show", action="store_true", help="print every answer")
    args = parser.parse_args()
    models = {"smollm2-135m (baseline)": default_model()} | dict(item.split("=", 1) for item in args.model)
    console = Console(width=200)
    table = Table(
        "model",
        "file MB",
        "checks passed",
        *[f"{name}" for name in ("slugify runs", "review names it", "test names it", "vote valid", "ship or hold")],
        "completion tok/s",
        "s per mission",
        "× baseline time",
        title="The demo's tasks, per model",
    )
    baseline_s = None
    for name, path in models.items():
        passed: dict[str, int] = {}
        tokens = seconds = 0.0
        for seed in range(args.rounds):
            brain = LlamaCppBrain(Path(path), seed=seed)
            checks, answers, used, spent = await one_mission(brain)
            brain.close()
            tokens, seconds = tokens + used, seconds + spent
            for check, ok in checks.items():
                passed[check] = passed.get(check, 0) + ok
            if args.show:
                console.print(f"[bold]{name}[/] seed {seed}: {json.dumps(answers, indent=1)}", markup=True)
        per_mission = seconds / args.rounds
        baseline_s = baseline_s or per_mission
        total = sum(passed.values())
        table.add_row(
            name,
            f"{Path(path).stat().st_size / 1e6:.0f}",
            f"{total}/{5 * args.rounds}",
            *[f"{passed[check]}/{args.rounds}" for check in passed],
            f"{tokens / seconds:.0f}",
            f"{per_mission:.1f}",
            f"{per_mission / baseline_s:.2f}",
        )
    console.print(table)


if __name__ == "__main__":
    asyncio.run(main())
