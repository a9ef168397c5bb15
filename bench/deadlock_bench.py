"""Deadlock detection per WaitStarted on wait-for graphs of growing size, next to folding the same waits alone.

Each WaitStarted is folded, then `decide_deadlocks` looks for the shortest cycle through it and the decided
DeadlockDetected events are folded back: what the streams worker's detector does per wait. The baseline folds the
same waits without deciding. Random waits between `agents` agents, two per agent, so cycles form as it goes.
Run: python bench/deadlock_bench.py [--agents 300 1000 3000]
"""

from __future__ import annotations

import argparse
import random
import time

from rich.console import Console
from rich.table import Table

from swarmlog.schemas.records import WaitStarted
from swarmlog.streams import waitgraph
from swarmlog.streams.waitgraph import decide_deadlocks, evolve

T0 = 1_750_000_000_000


def waits(agents: int, seed: int = 7) -> list[WaitStarted]:
    """Two WaitStarted per agent between random agents, 1 ms apart."""
    rng = random.Random(seed)
    names = [f"agent-{n:05}" for n in range(agents)]
    return [
        WaitStarted(
            event_id=f"e{n}",
            occurred_at=T0 + n,
            producer="bench",
            wait_id=f"w{n}",
            waiter_agent_id=rng.choice(names),
            waits_for_agent_id=rng.choice(names),
        )
        for n in range(2 * agents)
    ]


def detect_all(inputs: list[WaitStarted]) -> int:
    """Fold and decide per wait, folding the decisions back; returns how many deadlocks were decided."""
    state, found = waitgraph.INITIAL, 0
    for event in inputs:
        state = evolve(state, event)
        for deadlock in decide_deadlocks(state, event.occurred_at, event):
            state, found = evolve(state, deadlock), found + 1
    return found


def fold_all(inputs: list[WaitStarted]) -> None:
    """The waits folded without deciding (the baseline)."""
    state = waitgraph.INITIAL
    for event in inputs:
        state = evolve(state, event)


def best_of(runs: int, work) -> tuple[float, object]:
    """The fastest of `runs` timings of `work()` (seconds), with its result."""
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        timings.append(time.perf_counter() - start)
    return min(timings), result


def main() -> None:
    """Time detection and the fold alone per graph size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[300, 1000, 3000])
    table = Table(
        "agents",
        "waits",
        "deadlocks",
        "fold + detect µs/wait",
        "fold alone µs/wait",
        "× fold alone",
        title="deadlock detection per WaitStarted, one core (best of 3)",
    )
    for agents in parser.parse_args().agents:
        inputs = waits(agents)
        detect_s, found = best_of(3, lambda inputs=inputs: detect_all(inputs))
        fold_s, _ = best_of(3, lambda inputs=inputs: fold_all(inputs))
        table.add_row(
            f"{agents:,}",
            f"{len(inputs):,}",
            f"{found:,}",
            f"{detect_s / len(inputs) * 1e6:.1f}",
            f"{fold_s / len(inputs) * 1e6:.1f}",
            f"{detect_s / fold_s:.2f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
