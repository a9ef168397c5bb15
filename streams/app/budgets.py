"""Token budgets: usage and the budget's own decisions folded per agent; BudgetExceeded on usage, BudgetRestored on time.

swarm.usage and swarm.control are both keyed by agent_id with the same partition count, so one agent folds both
into one co-partitioned table. Decisions go to swarm.control and take effect when folded back from there (the log
decides); decisions in flight are not decided again, and their event ids are derived, so a repeat after a crash
is the same event. An agent's usage expires some minutes after its window (`budgets.expires_at`).
The worker folds with its configured window, and writes that window to every partition of swarm.control before it
starts (`announce_window`), so whoever folds the log (replay) buckets usage by the window the worker used.
"""

from __future__ import annotations

import functools

import faust

from swarmlog.envelope import stamp
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import BudgetWindowSet, TokensUsed
from swarmlog.streams.alerts import PRODUCER
from swarmlog.streams.budgets import (
    PROJECTION,
    AgentUsage,
    BudgetDecision,
    Budgets,
    agent_of,
    decide_budget,
    evolve_usage,
    expires_at,
)

from .config import StreamsConfig
from .expiry import InFlight
from .keyed import CHUNK, CHUNK_S, KeyedRows
from .records import RawStream, WorkerTopics, now_ms, raw_topic
from .tables import FoldTable, fold_table

USAGE, CONTROL = PROJECTION.topics
"""The usage it folds; where its decisions go, folded back from there."""
TO_EVERY_AGENT = "*"
"""The key of a swarm.control record addressed to no agent in particular."""


def install(app: faust.App, io: WorkerTopics, config: StreamsConfig) -> FoldTable:
    """Add the budget agent, its table and the restore timer to `app`; returns the table."""
    table = fold_table(app, "budgets")
    policy, window_ms = config.budget_policy, config.budget_window_ms
    rows = KeyedRows(app, table, PROJECTION.topics, functools.partial(expires_at, window_ms=window_ms))
    evolve = functools.partial(evolve_usage, window_ms=window_ms)
    in_flight = InFlight(lambda: app.consumer_generation_id)

    def state(usage: dict[str, AgentUsage]) -> Budgets:
        return Budgets(usage, window_ms=window_ms)

    async def send(decisions: list[BudgetDecision]) -> None:
        for decision in decisions:
            if in_flight.sending(decision.event_id):
                await io.send(CONTROL, decision.agent_id, decision)

    async def fold(stream: RawStream) -> None:
        async for chunk in io.decoded_chunks(stream, CHUNK, CHUNK_S):
            folded = rows.fold_chunk(chunk, agent_of, evolve)
            for event, _ in folded:
                in_flight.folded(event.event_id)
            for event, after in folded:  # each usage decided on the agent's usage right after it
                if isinstance(event, TokensUsed):
                    await send(decide_budget(state({event.agent_id: after} if after else {}), event, policy))

    async def restore() -> None:
        await send(decide_budget(state(rows.items()), now_ms(), policy))

    app.agent(raw_topic(app, *PROJECTION.topics), name="budgets")(fold)
    app.timer(config.tick_s, name="budget-restore")(restore)
    return table


async def announce_window(config: StreamsConfig) -> None:
    """Write the window and default budget this worker folds and decides with to every partition of swarm.control,
    where the budgets fold of each partition takes its window from (a restart with another window changes it)."""
    async with EventProducer(config.settings, client_id=f"{config.app_id}-window") as producer:
        for partition in sorted(await producer.raw.partitions_for(CONTROL)):
            window = stamp(
                BudgetWindowSet, producer=PRODUCER, window_ms=config.budget_window_ms, tokens=config.budget_tokens
            )
            await producer.send(CONTROL, window, key=TO_EVERY_AGENT, partition=partition)
