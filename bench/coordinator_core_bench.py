"""The coordinator's pure core at swarm scale, no Kafka: agents run one mission's tasks through decide + fold as the
shell drives them, next to the fold alone over the same journal (what replay and recovery cost) as the baseline.

It is the ceiling the Kafka shell can reach (bench/coordinator_bench.py measures the shell): assignments/s per region
with zero-latency agents, against the ≥ 2,000/s target of issue #12.

Run: python bench/coordinator_core_bench.py [--agents 96 500 2000] [--tasks 500 3000]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import time
from typing import Any

from rich.console import Console
from rich.table import Table

from swarmlog.coordinator import Config, Decision, Receive, State, Tick, decide, evolve, initial
from swarmlog.schemas import records
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentRegistered,
    MissionCompleted,
    MissionSubmitted,
    TaskAssigned,
    TaskCompleted,
    TaskStarted,
)

T0 = 1_750_000_000_000
TICK_EVERY = 200
"""Inputs decided between two ticks (a tick is also decided as the shell does, every 250 ms of its clock)."""


@dataclasses.dataclass
class Run:
    """One mission run through the core: its journal and what it took."""

    journal: list[Event]
    assigned: int
    decide_s: float


class Driver:
    """One region's coordinator state, fed input events and ticks; its journal as the shell would write it."""

    def __init__(self) -> None:
        self.state: State = initial(Config("eu", ("eu",)))
        self.journal: list[Event] = []
        self.assigned: collections.deque[TaskAssigned] = collections.deque()
        """Assignments not yet answered, oldest first."""
        self.now_ms = T0
        self._inputs = 0

    def send(self, kind: type[Event], **fields: Any) -> None:
        """Decide on a fresh input event (and a tick after every TICK_EVERY inputs)."""
        self._inputs += 1
        self.now_ms += 1
        envelope = {"event_id": f"in-{self._inputs}", "occurred_at": self.now_ms, "producer": "bench"}
        event = records.from_fields(kind.name, envelope | {"correlation_id": fields.get("mission_id")} | fields)
        self._apply(Receive(event, self.now_ms))
        if self._inputs % TICK_EVERY == 0:
            self._apply(Tick(self.now_ms, f"tick-{self._inputs}", T0))

    def _apply(self, command: Receive | Tick) -> None:
        """Decide a command and keep the state its events lead to (the decision carries it, as in the shell)."""
        decision = decide(command, self.state)
        assert isinstance(decision, Decision), decision
        if decision.state is not None:
            self.state = decision.state
        self.journal.extend(decision.events)
        self.assigned.extend(event for event in decision.events if isinstance(event, TaskAssigned))


def run(agents: int, tasks: int) -> Run:
    """Enlist `agents` agents, submit one mission of `tasks` independent tasks, and answer every assignment at once,
    oldest first, until the mission completes."""
    driver = Driver()
    for index in range(agents):
        driver.send(
            AgentRegistered,
            agent_id=f"a{index}",
            capabilities=["code"],
            model="scripted",
            brain="scripted",
            node="node-0",
            gpu=None,
            region="eu",
            slot=index,
            capacity=1,
        )
    started = time.perf_counter()  # the mission's decisions, not the enlisting
    specs = [
        {"task_id": f"t{index}", "prompt": f"do t{index}", "required_capabilities": ["code"], "depends_on": []}
        for index in range(tasks)
    ]
    driver.send(MissionSubmitted, mission_id="m", title="bench", tasks=specs, submitted_by="bench", region="eu")
    assigned = 0
    while driver.assigned:
        task = driver.assigned.popleft()
        assigned += 1
        attempt = {
            "mission_id": task.mission_id,
            "task_id": task.task_id,
            "replica": task.replica,
            "attempt": task.attempt,
            "agent_id": task.agent_id,
        }
        driver.send(TaskStarted, **attempt, ground_truth_version=None)
        driver.send(
            TaskCompleted,
            **attempt,
            output="ok",  # one candidate: consensus at once
            confidence=1.0,
            steps=1,
            prompt_tokens=5,
            completion_tokens=5,
            latency_ms=1,
        )
    decide_s = time.perf_counter() - started
    done = [event for event in driver.journal if isinstance(event, MissionCompleted)]
    assert done and done[0].tasks_completed == tasks, "the mission did not complete with every task"
    return Run(driver.journal, assigned, decide_s)


def fold_s(journal: list[Event]) -> float:
    """Seconds to fold the journal alone from the empty state (replay's and recovery's cost)."""
    state = initial(Config("eu", ("eu",)))
    started = time.perf_counter()
    for event in journal:
        state = evolve(state, event)
    return time.perf_counter() - started


def main() -> None:
    """Print a row per (agents, tasks)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[96, 500, 2000])
    parser.add_argument("--tasks", type=int, nargs="+", default=[500, 3000])
    args = parser.parse_args()
    table = Table(title="coordinator core: decide + fold vs the fold alone (one region, zero-latency agents)")
    for column in ("agents", "tasks", "journal events", "decide + fold s", "assignments/s", "fold alone s", "× fold"):
        table.add_column(column, justify="right")
    for agents in args.agents:
        for tasks in args.tasks:
            result = run(agents, tasks)
            folded = fold_s(result.journal)
            table.add_row(
                f"{agents:,}",
                f"{tasks:,}",
                f"{len(result.journal):,}",
                f"{result.decide_s:.2f}",
                f"{result.assigned / result.decide_s:,.0f}",
                f"{folded:.2f}",
                f"{result.decide_s / folded:.1f}x",
            )
    Console().print(table)


if __name__ == "__main__":
    main()
