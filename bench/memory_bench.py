"""Semantic recall over 100k experiences: the agent's index vs per-key scans, and embedding throughput, on one core.

The stored experiences are random unit vectors (embedding 100k sentences on this machine would take minutes and
changes nothing in a search's cost); queries are real embeddings of sentences. The baselines scan every key the
way a store without an index would: a pure Python cosine per key, and a numpy dot per key.
Run: python bench/memory_bench.py [--experiences N] [--queries N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Callable

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the table says; set before numpy loads BLAS
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np
from rich.console import Console
from rich.table import Table

from swarmlog.actors.memory.embeddings import MiniLM
from swarmlog.actors.memory.index import VectorIndex
from swarmlog.actors.memory.semantic import SemanticMemory
from swarmlog.envelope import now_ms

K = 3
EXPIRE_AT = 2**62
SENTENCES = [
    "Kafka consumers in one group split the partitions of a topic between them.",
    "Which planet is the biggest one in the solar system?",
    "Bake the bread at 220 degrees for thirty minutes until the crust is golden.",
    "The central bank raised interest rates to slow down inflation.",
    "How should the retry budget of a flaky integration test be chosen?",
    "Tomato plants need full sun, deep watering and a stake to climb.",
    "The deployment failed because the schema registry was unreachable.",
    "Summarise the reviewer's objections to the proposed cache design.",
]


def percentiles(samples_ms: list[float]) -> tuple[float, float]:
    """p50 and p99 of latencies in ms."""
    ordered = sorted(samples_ms)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def latencies(work: Callable[[int], object], count: int) -> list[float]:
    """Milliseconds of each of `count` calls of work(i)."""
    samples = []
    for i in range(count):
        start = time.perf_counter()
        work(i)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def python_scan(rows: list[list[float]], query: list[float]) -> list[int]:
    """Top-k by a pure Python cosine of every stored vector (unit vectors: a dot product)."""
    scores = [sum(a * b for a, b in zip(row, query, strict=True)) for row in rows]
    return sorted(range(len(rows)), key=scores.__getitem__, reverse=True)[:K]


def numpy_per_key_scan(vectors: np.ndarray, query: np.ndarray) -> list[int]:
    """Top-k by one numpy dot per stored vector, as a loop over fetched keys would do it."""
    scores = [float(np.dot(row, query)) for row in vectors]
    return sorted(range(len(scores)), key=scores.__getitem__, reverse=True)[:K]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--experiences", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--scan-queries", type=int, default=3, help="queries for the slow per-key baselines")
    args = parser.parse_args()

    model = MiniLM()
    queries = model.embed(SENTENCES)
    vectors = np.random.default_rng(0).standard_normal((args.experiences, model.dimension)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = VectorIndex(model.dimension)
    start = time.perf_counter()
    for row, vector in enumerate(vectors):
        index.add(f"experience:{row}", vector, f"memory {row}", EXPIRE_AT)
    load_s = time.perf_counter() - start

    now = now_ms()
    search_ms = latencies(lambda i: index.search(queries[i % len(queries)], K, now), args.queries)
    expected = [hit.key for hit in index.search(queries[0], K, now)]
    rows = vectors.tolist()
    python_ms = latencies(lambda i: python_scan(rows, queries[i % len(queries)].tolist()), args.scan_queries)
    numpy_ms = latencies(lambda i: numpy_per_key_scan(vectors, queries[i % len(queries)]), args.scan_queries)
    assert [f"experience:{row}" for row in python_scan(rows, queries[0].tolist())] == expected

    async def full_recalls() -> list[float]:
        async with SemanticMemory(None, model=model) as memory:
            memory._index = index  # the same 100k entries behind the agent's recall (embed the query + search)
            samples = []
            for i in range(args.queries // 4):
                start = time.perf_counter()
                await memory.recall(SENTENCES[i % len(SENTENCES)], K)
                samples.append((time.perf_counter() - start) * 1000)
            return samples

    recall_ms = asyncio.run(full_recalls())
    batch = SENTENCES * 32
    start = time.perf_counter()
    model.embed(batch)
    batch_rate = len(batch) / (time.perf_counter() - start)
    single_ms = latencies(lambda i: model.embed([SENTENCES[i % len(SENTENCES)]]), 50)

    table = Table(
        "recall over",
        "p50 ms",
        "p99 ms",
        "× index p50",
        title=f"top-{K} recall over {args.experiences:,} experiences (index filled in {load_s:.1f} s)",
    )
    index_p50, _index_p99 = percentiles(search_ms)
    for name, samples in (
        ("index: one matrix-vector product + argpartition", search_ms),
        ("agent recall: embed the query + index search", recall_ms),
        ("baseline: numpy dot per key", numpy_ms),
        ("baseline: pure Python cosine per key", python_ms),
    ):
        p50, p99 = percentiles(samples)
        table.add_row(name, f"{p50:,.2f}", f"{p99:,.2f}", f"{p50 / index_p50:,.1f}x")
    Console().print(table)
    throughput = Table("embedding", "value", title="all-MiniLM-L6-v2 in numpy")
    throughput.add_row(f"batched ({len(batch)} sentences, 32 a batch), sentences/s", f"{batch_rate:,.0f}")
    throughput.add_row("one sentence, p50 ms", f"{percentiles(single_ms)[0]:,.1f}")
    Console().print(throughput)


if __name__ == "__main__":
    main()
