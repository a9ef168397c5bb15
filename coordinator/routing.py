"""Capability routing: the best agent with a free place for a task by Jaccard similarity, ties broken deterministically."""

from __future__ import annotations

from collections.abc import Iterable

from swarmlog.coordinator.state import DECISION_MAKING, EnlistedAgent, TaskSpec

NO_REQUIREMENTS_SCORE = 0.5


def score(required: frozenset[str], capabilities: frozenset[str]) -> float:
    """Jaccard similarity of requirements and capabilities; 0.5 when the task requires nothing."""
    if not required:
        return NO_REQUIREMENTS_SCORE
    return len(required & capabilities) / len(required | capabilities)


def available(agent: EnlistedAgent) -> bool:
    """Whether an agent can take a task now: alive, running fewer tasks than its capacity, and not throttled."""
    return agent.alive and not agent.busy and not agent.throttled


def capable(spec: TaskSpec, agent: EnlistedAgent) -> bool:
    """Whether the agent's capabilities fit the task at all (busy or not): score above 0, decision_making for FINAL."""
    if spec.kind == "FINAL" and DECISION_MAKING not in agent.capabilities:
        return False
    return score(spec.required_capabilities, agent.capabilities) > 0


def holds(agent: EnlistedAgent, mission_id: str, task_id: str) -> bool:
    """Whether the agent holds an attempt of one of this task's replicas."""
    return any(key[:2] == (mission_id, task_id) for key in agent.tasks)


def choose(
    spec: TaskSpec, agents: Iterable[EnlistedAgent], exclude: frozenset[str] = frozenset(), mission_id: str = ""
) -> tuple[EnlistedAgent, float] | None:
    """The best available agent outside `exclude` that holds no replica of this task (of `mission_id`), and its
    score: highest score, then lowest load, then id."""
    eligible = [
        (score(spec.required_capabilities, agent.capabilities), agent)
        for agent in agents
        if available(agent)
        and agent.agent_id not in exclude
        and capable(spec, agent)
        and not holds(agent, mission_id, spec.task_id)
    ]
    if not eligible:
        return None
    value, agent = min(eligible, key=lambda pair: (-pair[0], pair[1].load, pair[1].agent_id))
    return agent, value
