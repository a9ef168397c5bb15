"""The budget window is a fact of the log: a worker started with a window of its own writes it to every partition of
swarm.control, and the replay of its budgets agrees with its table with no SWARMLOG_STREAMS_* variable set."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from worker_harness import Client, now_event, running_worker, tables_settled

from swarmlog.envelope import now_ms
from swarmlog.replay.diff import read_table
from swarmlog.schemas.records import BudgetWindowSet
from swarmlog.settings import Settings
from swarmlog.topics import CONTROL, USAGE, spec_for

pytestmark = pytest.mark.slow
WINDOW_MS = 7000
"""Neither the default window nor another test's, so a replay that folded with either would (almost always) differ."""
BUDGET = 1000


def test_a_worker_with_its_own_window_writes_it_and_the_replay_agrees_with_no_environment(
    settings: Settings, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("SWARMLOG_STREAMS_BUDGET_WINDOW_MS", raising=False)
    run, started_at = uuid.uuid4().hex[:6], now_ms()
    agents = [f"window-{run}-{n}" for n in range(6)]
    client = Client(settings.bootstrap)
    with running_worker(
        settings.bootstrap,
        settings.broker,
        settings.redis_url,
        tmp_path / "data",
        budget_tokens=BUDGET,
        budget_window_ms=WINDOW_MS,
    ) as worker:
        for agent in agents:  # 1200 tokens each: every agent is throttled, then restored at its window's end
            usage = [
                now_event("TokensUsed", agent_id=agent, generation_id=f"g{n}", prompt_tokens=400, completion_tokens=200)
                for n in range(2)
            ]
            client.send(USAGE, agent, *usage)
        asyncio.run(tables_settled(settings, worker.app_id, run, ("budgets",)))
        live, _ = asyncio.run(read_table(settings, f"{worker.app_id}-budgets-changelog", worker.app_id))
        # settled again, not compared once: a window's end may restore an agent between the two reads
        differences = asyncio.run(tables_settled(settings, worker.app_id, run, ("budgets",)))

    partitions = spec_for(settings, CONTROL).partitions
    announced = client.read(
        CONTROL,
        lambda event: isinstance(event, BudgetWindowSet) and event.occurred_at >= started_at,
        until=lambda found: len(found) >= partitions,
        timeout_s=10,
    )
    assert len({event.event_id for event in announced}) == partitions
    assert {(event.window_ms, event.tokens, event.producer) for event in announced} == {(WINDOW_MS, BUDGET, "streams")}
    usages = {agent: usage for agent, usage in live.items() if run in agent}
    assert usages.keys() == set(agents)
    assert all(usage.window_start % WINDOW_MS == 0 for usage in usages.values())
    assert not differences, differences[:3]
