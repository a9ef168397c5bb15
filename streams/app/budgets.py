"""Token budgets: usage and the budget's own decisions folded per agent; BudgetExceeded on usage, BudgetRestored on time.

swarm.usage and swarm.control are both keyed by agent_id with the same partition count, so one group folds both into
one co-partitioned table (grouped.py). Decisions go to swarm.control and take effect when folded back from there (the log
decides); decisions in flight are not decided again, and their event ids are derived, so a repeat after a crash
is the same event. An agent's usage expires some minutes after its window (`budgets.expires_at`).
The worker folds with its configured window, and writes that window to every partition of swarm.control before it
starts (`announce_window`), so whoever folds the log (replay) buckets usage by the window the worker used.
"""

from __future__ import annotations

import functools

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
from .grouped import Folded, GroupFold
from .records import WorkerTopics, now_ms
from .transport import WorkerApp

USAGE, CONTROL = PROJECTION.topics
"""The usage it folds; where its decisions go, folded back from there."""
TO_EVERY_AGENT = "*"
"""The key of a swarm.control record addressed to no agent in particular."""


def install(app: WorkerApp, io: WorkerTopics, config: StreamsConfig) -> GroupFold:
    """Add the budgets' fold and the restore timer to `app`; returns the fold."""
    policy, window_ms = config.budget_policy, config.budget_window_ms

    def state(usage: dict[str, AgentUsage]) -> Budgets:
        return Budgets(usage, window_ms=window_ms)

    async def send(decisions: list[BudgetDecision]) -> None:
        await io.send_all(CONTROL, [(d.agent_id, d) for d in decisions if in_flight.sending(d.event_id)])

    async def landed(folded: Folded) -> None:
        for event, _ in folded:
            in_flight.folded(event.event_id)
        for event, after in folded:  # each usage decided on the agent's usage right after it
            if isinstance(event, TokensUsed):
                await send(decide_budget(state({event.agent_id: after} if after else {}), event, policy))

    fold = app.group_fold(
        GroupFold(
            config,
            io,
            "budgets",
            PROJECTION.topics,
            agent_of,
            functools.partial(evolve_usage, window_ms=window_ms),
            functools.partial(expires_at, window_ms=window_ms),
            landed,
        )
    )
    in_flight = InFlight(lambda: fold.generation)

    async def restore() -> None:
        if fold.settled():
            await send(decide_budget(state(fold.items()), now_ms(), policy))

    app.timer(config.tick_s, name="budget-restore")(restore)
    return fold


async def announce_window(config: StreamsConfig) -> None:
    """Write the window and default budget this worker folds and decides with to every partition of swarm.control,
    where the budgets fold of each partition takes its window from (a restart with another window changes it)."""
    async with EventProducer(config.settings, client_id=f"{config.app_id}-window") as producer:
        for partition in sorted(await producer.raw.partitions_for(CONTROL)):
            window = stamp(
                BudgetWindowSet, producer=PRODUCER, window_ms=config.budget_window_ms, tokens=config.budget_tokens
            )
            await producer.send(CONTROL, window, key=TO_EVERY_AGENT, partition=partition)
