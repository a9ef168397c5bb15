"""Tokens/s of 1, 4 and 8 concurrent tasks through the vllm brain (the agent's path: chat template, action schema,
one request per task) against the raw AsyncLLMEngine given the same token ids and sampling, in the same run.

Run from vLLM's virtualenv: .venv-vllm/bin/python bench/vllm_bench.py [--rounds N] [--max-tokens N] (`make bench-vllm`)
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import time
from collections.abc import Awaitable, Callable

from rich.console import Console
from rich.table import Table

from swarmlog.actors.actions import ANSWER, action_schema
from swarmlog.actors.brains import open_brain
from swarmlog.actors.brains.vllm import VllmBrain

PROMPTS = ("Summarise in three sentences why an ordered log makes replay possible.", "Explain what a heartbeat is for.")
CONCURRENCY = (1, 4, 8)
SCHEMA = action_schema((ANSWER,))
Run = Callable[[int, int], Awaitable[int]]  # (concurrency, max tokens) -> completion tokens


def through_the_brain(brain: VllmBrain) -> Run:
    """N tasks at once as the agent runs them: each one brain.generate."""

    async def run(n: int, max_tokens: int) -> int:
        generations = await asyncio.gather(
            *(brain.generate(PROMPTS[k % len(PROMPTS)], SCHEMA, max_tokens) for k in range(n))
        )
        return sum(g.completion_tokens for g in generations)

    return run


def on_the_raw_engine(brain: VllmBrain) -> Run:
    """The same N requests straight to the engine: token ids templated beforehand, the same sampling."""
    prompts = [brain.prompt_token_ids(prompt) for prompt in PROMPTS]
    ids = itertools.count()

    async def one(prompt: list[int], max_tokens: int) -> int:
        tokens = 0
        async for output in brain.engine.generate(
            {"prompt_token_ids": prompt}, brain.sampling_params(SCHEMA, max_tokens), f"raw-{next(ids)}"
        ):
            tokens = len(output.outputs[0].token_ids)
        return tokens

    async def run(n: int, max_tokens: int) -> int:
        return sum(await asyncio.gather(*(one(prompts[k % len(prompts)], max_tokens) for k in range(n))))

    return run


async def rate(run: Run, n: int, max_tokens: int) -> float:
    """Completion tokens per second of one round."""
    start = time.perf_counter()
    tokens = await run(n, max_tokens)
    return tokens / (time.perf_counter() - start)


async def main(rounds: int, max_tokens: int) -> None:
    """Warm the engine up, then per concurrency alternate raw and brain rounds and report their medians."""
    start = time.perf_counter()
    brain = open_brain("vllm", seed=1)
    assert isinstance(brain, VllmBrain)
    up_s = time.perf_counter() - start
    try:
        raw, agent = on_the_raw_engine(brain), through_the_brain(brain)
        await agent(1, max_tokens)  # the schema's grammar compiled once, as in an agent's first task
        table = Table(title=f"vllm brain vs raw engine ({brain.model}, engine up in {up_s:.0f} s)")
        for column in ("concurrent tasks", "raw engine tok/s", "through the brain tok/s", "overhead"):
            table.add_column(column, justify="right")
        for n in CONCURRENCY:
            samples: dict[str, list[float]] = {"raw": [], "brain": []}
            for r in range(rounds):  # alternate which goes first, so neither always meets a cooler cache
                order = (("raw", raw), ("brain", agent)) if r % 2 == 0 else (("brain", agent), ("raw", raw))
                for name, run in order:
                    samples[name].append(await rate(run, n, max_tokens))
            raw_rate, brain_rate = statistics.median(samples["raw"]), statistics.median(samples["brain"])
            table.add_row(str(n), f"{raw_rate:.0f}", f"{brain_rate:.0f}", f"{(1 - brain_rate / raw_rate) * 100:+.1f} %")
        Console().print(table)
    finally:
        brain.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per concurrency and path (median reported)")
    parser.add_argument("--max-tokens", type=int, default=128, help="token budget of each task's generation")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.rounds, arguments.max_tokens))
