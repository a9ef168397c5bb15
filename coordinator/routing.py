"""Capability routing: the best idle agent for a task by Jaccard similarity, ties broken deterministically."""

from __future__ import annotations

from collections.abc import Mapping

from swarmlog.coordinator.idle import IdleAgents
from swarmlog.coordinator.state import DECISION_MAKING, EnlistedAgent, TaskSpec

NO_REQUIREMENTS_SCORE = 0.5


def score(required: frozenset[str], capabilities: frozenset[str]) -> float:
    """Jaccard similarity of requirements and capabilities; 0.5 when the task requires nothing."""
    if not required:
        return NO_REQUIREMENTS_SCORE
    return len(required & capabilities) / len(required | capabilities)


def capable(spec: TaskSpec, capabilities: frozenset[str]) -> bool:
    """Whether these capabilities fit the task at all (busy or not): score above 0, decision_making for FINAL."""
    if spec.kind == "FINAL" and DECISION_MAKING not in capabilities:
        return False
    return score(spec.required_capabilities, capabilities) > 0


def holds(agent: EnlistedAgent, mission_id: str, task_id: str) -> bool:
    """Whether the agent holds an attempt of one of this task's replicas."""
    return any(key[:2] == (mission_id, task_id) for key in agent.tasks)


def choose(
    spec: TaskSpec,
    idle: IdleAgents,
    agents: Mapping[str, EnlistedAgent],
    exclude: frozenset[str] = frozenset(),
    mission_id: str = "",
) -> tuple[EnlistedAgent, float] | None:
    """The best idle agent outside `exclude` that holds no replica of this task (of `mission_id`), and its score:
    highest score, then lowest load, then id. Each capability set is scored once, and its group (in load, id order)
    is read up to its first eligible agent, or to the first that ranks below the best found."""
    best: tuple[float, int, str] | None = None
    for capabilities, members in idle.groups():
        if not capable(spec, capabilities):
            continue
        value = score(spec.required_capabilities, capabilities)
        for load, agent_id in members:
            rank = (-value, load, agent_id)
            if best is not None and rank >= best:
                break
            if agent_id not in exclude and not holds(agents[agent_id], mission_id, spec.task_id):
                best = rank
                break
    if best is None:
        return None
    return agents[best[2]], -best[0]
