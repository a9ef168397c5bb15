"""Token budgets per agent per tumbling window: a pure fold of TokensUsed and of its own alerts, and the decisions.

Rules:
- windows are aligned to the epoch on TokensUsed event time; an agent's state holds only its current window,
  so usage that arrives for an earlier window is too late and ignored;
- a generation counts once (dedupe by generation_id within the window); negative token counts count as 0;
- BudgetExceeded once per window, when usage passes (is above) the budget: the agent is throttled until
  window_end; BudgetRestored once per throttle, at its window_end, decided by a tick at or after it or
  by the agent's next TokensUsed; its window_start is that boundary, so both paths decide the same event;
- an agent's usage is dropped RETENTION_MS after its window ended, unless a throttle still waits for its restore
  (`expires_at`): later usage starts a new window anyway, and usage that late for that window would be ignored;
- the window length is a fact of the log: the streams worker writes a BudgetWindowSet to every partition of
  swarm.control when it starts, and usage after it is bucketed by its window (before any, by DEFAULT_WINDOW_MS;
  a window under 1 ms is ignored).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable, Iterator, Mapping, Set

from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import BudgetExceeded, BudgetRestored, BudgetWindowSet, TokensUsed
from swarmlog.topics import CONTROL, USAGE

from .alerts import alert
from .keyed import RETENTION_MS, evolve_by_agent, fold_by_agent
from .persistent import PMap, PSet, replace

DEFAULT_WINDOW_MS = 60_000
BudgetDecision = BudgetExceeded | BudgetRestored


@dataclasses.dataclass(frozen=True, slots=True)
class BudgetPolicy:
    """Tokens allowed per window: a default, and overrides by agent id."""

    default_tokens: int
    per_agent: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def budget_for(self, agent_id: str) -> int:
        """The budget of `agent_id` per window."""
        return self.per_agent.get(agent_id, self.default_tokens)


@dataclasses.dataclass(frozen=True, slots=True)
class AgentUsage:
    """One agent's current window, and its throttle if any."""

    window_start: int
    used: int = 0
    generations: Set[str] = PSet()
    exceeded_window: int | None = None
    throttled_until: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Budgets:
    """Usage by agent id, with the window length the fold buckets by."""

    agents: Mapping[str, AgentUsage] = dataclasses.field(default_factory=PMap)
    window_ms: int = DEFAULT_WINDOW_MS


INITIAL = Budgets()


def evolve(state: Budgets, event: Event) -> Budgets:
    """The budgets after `event`, without the usages expired by its time (a BudgetWindowSet sets the window first:
    expiry, like the worker's, goes by the window in force); other events leave them as they are."""
    if isinstance(event, BudgetWindowSet):
        state = _window_set(state, event)
    agents = evolve_by_agent(
        state.agents,
        event,
        agent_of,
        functools.partial(evolve_usage, window_ms=state.window_ms),
        functools.partial(expires_at, window_ms=state.window_ms),
    )
    return state if agents is state.agents else replace(state, agents=agents)


def evolve_all(state: Budgets, events: Iterable[Event]) -> Budgets:
    """`evolve` over `events` in order, with the usages held in a dict meanwhile, as the worker's table holds them."""
    remaining = iter(events)
    while True:
        window_sets: list[BudgetWindowSet] = []
        agents = fold_by_agent(
            state.agents,
            _until_window_set(remaining, window_sets),
            agent_of,
            functools.partial(evolve_usage, window_ms=state.window_ms),
            functools.partial(expires_at, window_ms=state.window_ms),
        )
        state = replace(state, agents=agents)
        if not window_sets:
            return state
        state = evolve(state, window_sets[0])


def _until_window_set(events: Iterator[Event], window_sets: list[BudgetWindowSet]) -> Iterator[Event]:
    """`events` up to the first BudgetWindowSet, which is put in `window_sets` instead."""
    for event in events:
        if isinstance(event, BudgetWindowSet):
            window_sets.append(event)
            return
        yield event


def _window_set(state: Budgets, event: BudgetWindowSet) -> Budgets:
    """The budgets with the event's window; a window under 1 ms buckets nothing and is ignored."""
    if event.window_ms < 1 or event.window_ms == state.window_ms:
        return state
    return replace(state, window_ms=event.window_ms)


def expires_at(usage: AgentUsage, window_ms: int) -> int | None:
    """When an agent's usage may go: RETENTION_MS after its window (of `window_ms`) ended; None while throttled."""
    return None if usage.throttled_until is not None else usage.window_start + window_ms + RETENTION_MS


def agent_of(event: Event) -> str | None:
    """The agent a usage or budget event is about; None for any other event."""
    match event:
        case TokensUsed() | BudgetExceeded() | BudgetRestored():
            return event.agent_id
        case _:
            return None


def evolve_usage(usage: AgentUsage | None, event: Event, window_ms: int) -> AgentUsage | None:
    """One agent's usage after `event`, in `window_ms` windows (the per-key fold); `usage` itself when unchanged."""
    match event:
        case TokensUsed():
            return _used(usage, event, window_start(event.occurred_at, window_ms))
        case BudgetExceeded():
            return _exceeded(usage, event)
        case BudgetRestored() if usage is not None:
            return _restored(usage, event)
        case _:
            return usage


def decide_budget(state: Budgets, trigger: Event | int, policy: BudgetPolicy) -> list[BudgetDecision]:
    """BudgetRestored/BudgetExceeded due after a folded TokensUsed (for its agent) or a tick at `now_ms` (for all)."""
    if isinstance(trigger, int):
        return [event for agent_id in sorted(state.agents) for event in _due(state, agent_id, trigger, policy, None)]
    if not isinstance(trigger, TokensUsed):
        return []
    return _due(state, trigger.agent_id, trigger.occurred_at, policy, trigger.event_id)


def window_start(at_ms: int, window_ms: int) -> int:
    """The start of the tumbling window that holds `at_ms`."""
    return at_ms - at_ms % window_ms


def _due(state: Budgets, agent_id: str, now_ms: int, policy: BudgetPolicy, cause: str | None) -> list[BudgetDecision]:
    usage = state.agents.get(agent_id)
    if usage is None:
        return []
    due: list[BudgetDecision] = []
    if usage.throttled_until is not None and usage.throttled_until <= now_ms:
        due.append(
            alert(
                BudgetRestored,
                now_ms,
                (agent_id, usage.throttled_until),
                causation_id=cause,
                agent_id=agent_id,
                window_start=usage.throttled_until,
            )
        )
    budget = policy.budget_for(agent_id)
    if usage.used > budget and usage.exceeded_window != usage.window_start:
        due.append(
            alert(
                BudgetExceeded,
                now_ms,
                (agent_id, usage.window_start),
                causation_id=cause,
                agent_id=agent_id,
                window_start=usage.window_start,
                window_end=usage.window_start + state.window_ms,
                used=usage.used,
                budget=budget,
            )
        )
    return due


def _used(usage: AgentUsage | None, event: TokensUsed, window: int) -> AgentUsage:
    tokens = max(0, event.prompt_tokens) + max(0, event.completion_tokens)
    generation = event.generation_id
    if usage is None:
        return AgentUsage(window, tokens, PSet((generation,)))
    if window < usage.window_start or (window == usage.window_start and generation in usage.generations):
        return usage
    if window > usage.window_start:
        return replace(usage, window_start=window, used=tokens, generations=PSet((generation,)))
    return replace(usage, used=usage.used + tokens, generations=PSet(usage.generations).add(generation))


def _exceeded(usage: AgentUsage | None, event: BudgetExceeded) -> AgentUsage:
    start, end = event.window_start, event.window_end
    if usage is None:
        return AgentUsage(start, exceeded_window=start, throttled_until=end)
    if usage.exceeded_window is not None and start <= usage.exceeded_window:
        return usage
    return replace(usage, exceeded_window=start, throttled_until=end)


def _restored(usage: AgentUsage, event: BudgetRestored) -> AgentUsage:
    if usage.throttled_until is None or event.window_start < usage.throttled_until:
        return usage
    return replace(usage, throttled_until=None)


PROJECTION: Projection[None, Budgets] = Projection(
    "budgets", (USAGE, CONTROL), lambda _: INITIAL, evolve, snapshot_version=1, evolve_all=evolve_all
)
"""Token usage per agent per window, and the window itself (one state: the worker's table is its agents)."""
