"""Registry and budget events: enlist and delist this region's agents, note throttles, take a lost agent's tasks back."""

from __future__ import annotations

from swarmlog.coordinator.dispatch import reassign
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import DEREGISTERED
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDelisted,
    AgentDeregistered,
    AgentEnlisted,
    AgentRegistered,
    AgentThrottleNoted,
    BudgetExceeded,
    BudgetRestored,
)


def on_registered(draft: Draft, registered: AgentRegistered) -> None:
    """Enlist an agent of this region that is new, back, or changed; other regions' agents are not ours."""
    if registered.region != draft.state.config.region:
        return
    capabilities = frozenset(registered.capabilities)
    known = draft.state.agents.get(registered.agent_id)
    if (
        known
        and known.alive
        and (known.slot, known.capabilities, known.model, known.capacity)
        == (registered.slot, capabilities, registered.model, registered.capacity)
    ):
        return
    draft.emit(
        AgentEnlisted,
        None,
        agent_id=registered.agent_id,
        region=registered.region,
        slot=registered.slot,
        capabilities=sorted(capabilities),
        model=registered.model,
        capacity=registered.capacity,
    )


def on_deregistered(draft: Draft, deregistered: AgentDeregistered) -> None:
    """Delist an agent that left cleanly and reassign its tasks (its slot is released a retention later)."""
    _delist(draft, deregistered.agent_id, f"{DEREGISTERED}{deregistered.reason}")


def on_declared_dead(draft: Draft, dead: AgentDeclaredDead) -> None:
    """Delist an agent that stopped heartbeating and reassign its tasks."""
    _delist(draft, dead.agent_id, f"declared dead: no heartbeat for {dead.timeout_ms} ms")


def on_budget_exceeded(draft: Draft, exceeded: BudgetExceeded) -> None:
    """Stop routing to an agent over its token budget."""
    agent = draft.state.agents.get(exceeded.agent_id)
    if agent and agent.alive and not agent.throttled:
        draft.emit(AgentThrottleNoted, None, agent_id=agent.agent_id, throttled=True)


def on_budget_restored(draft: Draft, restored: BudgetRestored) -> None:
    """Route to a throttled agent again once its budget window restarts."""
    agent = draft.state.agents.get(restored.agent_id)
    if agent and agent.throttled:
        draft.emit(AgentThrottleNoted, None, agent_id=agent.agent_id, throttled=False)


def _delist(draft: Draft, agent_id: str, reason: str) -> None:
    """AgentDelisted, then TaskReassigned for each attempt it held, in order (the mission routes attempt + 1)."""
    agent = draft.state.agents.get(agent_id)
    if agent is None or not agent.alive:
        return
    draft.emit(AgentDelisted, None, agent_id=agent_id, reason=reason)
    for key in sorted(agent.tasks):
        reassign(draft, key, agent_id, reason)
