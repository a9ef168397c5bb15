"""Putting replicas on agents: assign the next attempt or queue it, drain the queue, take an attempt back or cancel it."""

from __future__ import annotations

from collections.abc import Iterable

from swarmlog.coordinator import routing
from swarmlog.coordinator.consensus import leaves
from swarmlog.coordinator.draft import Draft
from swarmlog.coordinator.state import DONE, RUNNING, EnlistedAgent, MissionState, Replica, ReplicaKey, TaskSpec
from swarmlog.schemas.records import TaskAssigned, TaskCancelled, TaskQueued, TaskReassigned

ROUTING_EVENT_BYTES = 512
"""About the most bytes a routing event takes in the journal besides its ids, capabilities, prompt and inputs: its
envelope and fixed fields, the record's overhead, headers and a signature."""


def route(draft: Draft, mission_id: str, spec: TaskSpec, index: int) -> None:
    """Assign the replica's next attempt to the best available agent, or queue it."""
    attempt = draft.state.missions[mission_id].replica(spec.task_id, index).attempt + 1
    if not _assign(draft, mission_id, spec, index, attempt):
        draft.routed_bytes += _routing_bytes(mission_id, spec)
        draft.emit(
            TaskQueued,
            mission_id,
            mission_id=mission_id,
            task_id=spec.task_id,
            replica=index,
            attempt=attempt,
            required_capabilities=sorted(spec.required_capabilities),
            reason="no alive, unthrottled agent with a free place matches",
        )


def drain(draft: Draft) -> None:
    """Assign queued attempts, oldest first, where an agent is available for them."""
    for mission_id, task_id, index in draft.state.queue:
        if not draft.state.idle:
            return
        mission = draft.state.missions[mission_id]
        _assign(draft, mission_id, mission.tasks[task_id], index, mission.replica(task_id, index).attempt)


def reassign(draft: Draft, key: ReplicaKey, agent_id: str, reason: str) -> None:
    """Take the running attempt away from its agent; the mission routes the next attempt."""
    mission_id, task_id, index = key
    attempt = draft.state.missions[mission_id].replica(task_id, index).attempt
    draft.emit(
        TaskReassigned,
        mission_id,
        mission_id=mission_id,
        task_id=task_id,
        replica=index,
        attempt=attempt,
        from_agent_id=agent_id,
        reason=reason,
    )


def cancel(draft: Draft, key: ReplicaKey, replica: Replica, reason: str) -> None:
    """Cancel a replica's current attempt on its agent."""
    mission_id, task_id, index = key
    draft.emit(
        TaskCancelled,
        mission_id,
        mission_id=mission_id,
        task_id=task_id,
        replica=index,
        attempt=replica.attempt,
        agent_id=replica.agent_id,
        reason=reason,
    )


def _assign(draft: Draft, mission_id: str, spec: TaskSpec, index: int, attempt: int) -> bool:
    """Emit TaskAssigned for this attempt on the best agent; False when none is eligible."""
    mission, state = draft.state.missions[mission_id], draft.state
    siblings = _on_siblings(mission, spec, index)
    # Prefer agents that have not failed this replica yet; when none could ever take it, retry on one that did.
    tried = siblings | mission.replica(spec.task_id, index).tried
    choice = routing.choose(spec, state.idle, state.agents, tried, mission_id)
    if choice is None and tried != siblings and not capable_elsewhere(spec, state.agents.values(), tried):
        choice = routing.choose(spec, state.idle, state.agents, siblings, mission_id)
    if choice is None:
        return False
    agent, score = choice
    inputs = _inputs(mission, spec)
    draft.routed_bytes += _routing_bytes(mission_id, spec, spec.prompt, *inputs, *inputs.values())
    draft.emit(
        TaskAssigned,
        mission_id,
        mission_id=mission_id,
        task_id=spec.task_id,
        replica=index,
        attempt=attempt,
        kind=spec.kind,
        agent_id=agent.agent_id,
        slot=agent.slot,
        score=score,
        prompt=spec.prompt,
        inputs=inputs,
        required_capabilities=sorted(spec.required_capabilities),
        max_steps=spec.max_steps,
        max_tokens=spec.max_tokens,
    )
    return True


def _routing_bytes(mission_id: str, spec: TaskSpec, *texts: str) -> int:
    """About the bytes of a routing event of the task carrying `texts` (an assignment's prompt and inputs)."""
    named = (mission_id, spec.task_id, *spec.required_capabilities, *texts)
    return ROUTING_EVENT_BYTES + sum(len(text.encode()) for text in named)


def _on_siblings(mission: MissionState, spec: TaskSpec, index: int) -> frozenset[str]:
    """Agents running or done on the task's other replicas: a replica never shares an agent with its siblings."""
    siblings = (mission.replica(spec.task_id, other) for other in range(spec.replicas) if other != index)
    return frozenset(replica.agent_id for replica in siblings if replica.status in (RUNNING, DONE) and replica.agent_id)


def capable_elsewhere(spec: TaskSpec, agents: Iterable[EnlistedAgent], excluded: frozenset[str]) -> bool:
    """Whether some alive agent outside `excluded` could take the task, now or once it is idle."""
    return any(
        agent.alive and agent.agent_id not in excluded and routing.capable(spec, agent.capabilities) for agent in agents
    )


def _inputs(mission: MissionState, spec: TaskSpec) -> dict[str, str]:
    """The outputs a task receives: its dependencies' (see `output`), or the consensus for FINAL; where the mission
    passes replicas, each succeeded replica's of a replicated dependency (of every leaf task, for FINAL) too, as
    `<task>/<replica>`."""
    if spec.kind == "FINAL":
        given, sources = {"consensus": mission.decision or ""}, [leaf.task_id for leaf in leaves(mission)]
    else:
        given, sources = {dep: output(mission, dep) or "" for dep in spec.depends_on}, list(spec.depends_on)
    if mission.pass_replicas:
        given |= {key: value for task_id in sources for key, value in _replica_outputs(mission, task_id).items()}
    return given


def _replica_outputs(mission: MissionState, task_id: str) -> dict[str, str]:
    """Each succeeded replica's output of a replicated task, by `<task>/<replica>` (none for a single replica)."""
    spec = mission.tasks[task_id]
    if spec.replicas < 2:
        return {}
    found = ((index, mission.replica(task_id, index)) for index in range(spec.replicas))
    return {f"{task_id}/{index}": replica.output or "" for index, replica in found if replica.status == DONE}


def output(mission: MissionState, task_id: str) -> str | None:
    """The output a task gives: the replica its cross-check chose, else its first succeeded replica's, if any."""
    check = mission.checks.get(task_id)
    if check is not None and check.replica is not None:
        return mission.replica(task_id, check.replica).output
    for index in range(mission.tasks[task_id].replicas):
        replica = mission.replica(task_id, index)
        if replica.status == DONE:
            return replica.output
    return None
