"""Offline replay throughput: history load, raw decode, fold only, and decode + fold, on one core.

The history mixes heartbeats (registry), token usage (budgets) and waits (wait-for graph) of 50 agents.
Run: python bench/replay_bench.py [--events N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

from swarmlog.replay import history
from swarmlog.replay.components import COMPONENTS
from swarmlog.replay.fold import Record, replay, selected
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.events import Event

T0 = 1_750_000_000_000
AGENTS = 50
REGIONS = ("region-0",)
FOLDS = ("registry", "budgets", "waitgraph")


def events(count: int) -> Iterator[tuple[str, Event]]:
    """`count` (topic, event) pairs: 6 heartbeats, 3 usages and a wait started or ended in every 10."""
    for n in range(count):
        agent, at, kind = f"agent-{n % AGENTS}", T0 + n, n % 10
        envelope = {"event_id": f"e-{n}", "occurred_at": at, "correlation_id": None, "causation_id": None,
                    "producer": "bench"}
        if n < AGENTS:
            yield "swarm.agents.registry", Event("AgentRegistered", {
                **envelope, "agent_id": agent, "capabilities": ["code"], "model": "m", "brain": "scripted",
                "node": "n", "gpu": None, "region": "region-0", "slot": n})
        elif kind < 6:
            yield "swarm.agents.heartbeats", Event("AgentHeartbeat", {
                **envelope, "agent_id": agent, "registration_id": f"e-{n % AGENTS}", "sequence": n, "status": "BUSY",
                "in_flight_task": None, "region": "region-0", "slot": n % AGENTS})
        elif kind < 9:
            yield "swarm.usage", Event("TokensUsed", {
                **envelope, "agent_id": agent, "generation_id": f"g-{n}", "prompt_tokens": 30,
                "completion_tokens": 20, "mission_id": None, "task_id": None})
        else:
            name = "WaitStarted" if n % 20 == 9 else "WaitEnded"
            wait = {"wait_id": f"w-{n // 20}", "waiter_agent_id": agent, "waits_for_agent_id": f"agent-{(n + 1) % AGENTS}"}
            extra = {"mission_id": None, "task_id": None} if name == "WaitStarted" else {"outcome": "ANSWERED"}
            yield "swarm.waits", Event(name, {**envelope, **wait, **extra})


def timed(work: Callable[[], object]) -> float:
    """Seconds `work` takes."""
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    """Build the history, write and load it, then time each stage and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    count = parser.parse_args().events
    console, codec = Console(), default_codec()
    with console.status(f"encoding {count:,} events"):
        records = [Record(topic, 0, n, T0 + n, None, codec.encode(event)) for n, (topic, event) in
                   enumerate(events(count))]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.hist"
        history.export(path, records, REGIONS, {"bench": count})
        size = path.stat().st_size
        load_s = timed(lambda: history.load(path))
    decode_s = timed(lambda: [codec.decode(record.value) for record in records])
    rows = [("load history file", count, load_s), ("decode only (raw rate)", count, decode_s)]
    for name in FOLDS:
        fold = COMPONENTS[name]
        mine = selected(fold, None, REGIONS, records)
        decoded = [codec.decode(record.value) for record in mine]

        def fold_only(fold=fold, decoded=decoded) -> None:
            state = fold.start("", REGIONS)
            for event in decoded:
                state = fold.evolve(state, event)

        rows.append((f"fold only: {name}", len(decoded), timed(fold_only)))
        rows.append((f"decode + fold: {name}", len(mine), timed(lambda f=fold, m=mine: replay(f, None, REGIONS, m))))
    decode_rate = count / decode_s
    table = Table("stage", "events", "seconds", "events/s", "× decode rate",
                  title=f"offline replay, {count:,} events, history file {size / 1e6:.1f} MB, one core")
    for stage, events_count, seconds in rows:
        rate = events_count / seconds
        table.add_row(stage, f"{events_count:,}", f"{seconds:.2f}", f"{rate:,.0f}", f"{rate / decode_rate:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
