"""bench/swarm_bench.py's reading of a mission: makespan, its bounds, dispatch under load and handoffs, from events."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from swarm_bench import SCENARIOS, Run, mission, mission_result

from swarmlog.client import MissionClient
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    ConsensusReached,
    MissionCompleted,
    PhaseStarted,
    TaskAssigned,
    TaskCompleted,
    TaskStarted,
)

T0 = 1_700_000_000_000


def envelope(n: int, at: int) -> dict[str, Any]:
    """An event's envelope, `at` ms after T0."""
    return {"event_id": f"e{n}", "occurred_at": T0 + at, "producer": "test"}


def attempt_events(n: int, mission_id: str, task: str, agent: str, times: tuple[int, int, int]) -> list[Event]:
    """TaskAssigned, TaskStarted and TaskCompleted of one attempt at the given times."""
    fields = {"mission_id": mission_id, "task_id": task, "replica": 0, "attempt": 1, "agent_id": agent}
    assigned, started, completed = times
    return [
        TaskAssigned(**envelope(3 * n, assigned), **fields, slot=0, score=1.0, prompt="p"),
        TaskStarted(**envelope(3 * n + 1, started), **fields),
        TaskCompleted(**envelope(3 * n + 2, completed), **fields, output="o", steps=1, latency_ms=0),
    ]


def test_a_mission_is_read_against_its_bounds() -> None:
    scenario = SCENARIOS["b"]
    submitted = MissionClient.validate_offline(mission(scenario, "region-0", 3, 1, "t"))
    submitted = msgspec.structs.replace(submitted, occurred_at=T0)
    m = submitted.mission_id
    attempts = [
        *attempt_events(0, m, "t0", "x", (10, 20, 1020)),
        *attempt_events(1, m, "t1", "y", (10, 30, 2030)),
        *attempt_events(2, m, "t2", "x", (1040, 1050, 1550)),
        *attempt_events(3, m, "@final", "y", (2150, 2160, 2660)),
    ]
    journal = [e for e in attempts if isinstance(e, TaskAssigned)] + [
        PhaseStarted(**envelope(90, 2040), mission_id=m, phase="CONSENSUS"),
        ConsensusReached(
            **envelope(91, 2140),
            mission_id=m,
            ballot_id="b",
            candidate_id="t0/0",
            output="o",
            support=1.0,
            votes=0,
            voters=2,
            strategy="MAJORITY",
            consensus_ms=100,
        ),
        MissionCompleted(
            **envelope(92, 2700),
            mission_id=m,
            success=True,
            latency_ms=2700,
            agent_count=2,
            tasks_completed=4,
            tasks_failed=0,
        ),
    ]
    run = Run(
        scenario,
        [1.0],
        [],
        {"region-0": submitted},
        {"region-0": journal},
        [e for e in attempts if not isinstance(e, TaskAssigned)],
        [],
        [],
        (0.0, 1.0),
        0.5,
        (0.0, 0.0, 0.0),
        None,
    )
    result = mission_result(run, "region-0")
    assert result.completed and result.makespan == 2700
    assert (result.work_sum, result.longest, result.consensus, result.final) == (3500, 2000, 100, 500)
    assert result.bound == 3500 / 2 + 2000 + 100 + 500
    assert result.lower_bound == 2000 + 100 + 500
    assert result.consensus_to_final == 20
    assert sorted(result.under_load) == [10, 10, 10, 20]
    assert (result.assigned_at, result.burst_ms) == ([T0 + 10, T0 + 10, T0 + 1040], 10)
    assert [(h.gap, h.to_assigned) for h in result.handoff] == [(30, 20)]
