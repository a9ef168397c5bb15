"""Offline replay throughput from a history file, next to the raw read + decode rate of the same file, on one core.

The history mixes heartbeats (registry), token usage (budgets) and waits (wait-for graph) of 50 agents. Each fold
row times reading the file, decoding the component's records and folding them; rates are history events per second.
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
from swarmlog.replay.fold import Record, ordered, replay, selected
from swarmlog.schemas.codec import Codec, default_codec
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


def all_components(path: Path, codec: Codec) -> None:
    """Read the file once, decode each record once, and fold it into every component that reads its topic."""
    folds = [COMPONENTS[name] for name in FOLDS]
    states = [fold.start("", REGIONS) for fold in folds]
    for record in ordered(history.load(path).records):
        event = codec.decode(record.value)
        for index, fold in enumerate(folds):
            if record.topic in fold.topics:
                states[index] = fold.evolve(states[index], event)


def main() -> None:
    """Build the history, write it, then time each stage against the raw read + decode rate and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=1_000_000)
    count = parser.parse_args().events
    console, codec = Console(), default_codec()
    with console.status(f"encoding {count:,} events"):
        records = [Record(topic, 0, n, T0 + n, None, codec.encode(event)) for n, (topic, event) in
                   enumerate(events(count))]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "bench.hist"
        rows = [("write history file", timed(lambda: history.export(path, records, REGIONS, {"bench": count})))]
        size = path.stat().st_size
        rows.append(("read history file", timed(lambda: history.load(path))))
        raw_s = timed(lambda: [codec.decode(record.value) for record in history.load(path).records])
        rows.append(("read + decode (raw rate)", raw_s))
        for name in FOLDS:
            rows.append((f"read + fold: {name}", timed(lambda f=COMPONENTS[name]: replay(f, None, REGIONS,
                                                                                         history.load(path).records))))
        rows.append(("read + fold: all three, one pass", timed(lambda: all_components(path, codec))))
    table = Table("stage", "seconds", "history events/s", "× read + decode",
                  title=f"offline replay, {count:,} events, history file {size / 1e6:.1f} MB, one core")
    for stage, seconds in rows:
        table.add_row(stage, f"{seconds:.2f}", f"{count / seconds:,.0f}", f"{raw_s / seconds:.2f}")
    console.print(table)
    console.print(fold_only_table(records, codec))


def fold_only_table(records: list[Record], codec: Codec) -> Table:
    """Each component's own events, already decoded, through its fold: the fold's speed alone."""
    table = Table("component", "events", "seconds", "events/s", title="fold only (events already decoded)")
    for name in FOLDS:
        fold = COMPONENTS[name]
        decoded = [codec.decode(record.value) for record in selected(fold, None, REGIONS, records)]

        def fold_only(fold=fold, decoded=decoded) -> None:
            state = fold.start("", REGIONS)
            for event in decoded:
                state = fold.evolve(state, event)

        seconds = timed(fold_only)
        table.add_row(name, f"{len(decoded):,}", f"{seconds:.2f}", f"{len(decoded) / seconds:,.0f}")
    return table


if __name__ == "__main__":
    main()
