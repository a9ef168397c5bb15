"""How long an agent's output may be: a token budget per brain (--max-tokens), the action content it leaves, an
output of that length carried whole by the task's events on a real broker, and an input the agent cannot read."""

from __future__ import annotations

import json
import zlib

import msgspec
import pytest
from agent_harness import Log, send_inbox, slot_of, spawner, stop_agent, task_assigned

from swarmlog import topics
from swarmlog.actors.actions import (
    ACTION_OVERHEAD_TOKENS,
    ANSWER,
    MAX_ACTION_TOKENS,
    MAX_CONTENT,
    Action,
    Malformed,
    action_schema,
    content_limit,
    parse_action,
)
from swarmlog.actors.brains import LLAMACPP_CONTEXT, PROMPT_ROOM, TEMPERATURE, max_tokens_for
from swarmlog.errors import ConfigError
from swarmlog.schemas.artifacts import ArtifactRef
from swarmlog.schemas.records import AgentRegistered, TaskCompleted, TaskFailed

MB = 1024 * 1024


def answer(content: str) -> str:
    return json.dumps({"action": "answer", "content": content, "confidence": 0.9})


def test_the_default_budget_leaves_the_default_content_and_a_larger_one_leaves_more():
    assert content_limit(MAX_ACTION_TOKENS) == MAX_CONTENT
    assert content_limit(2048) == 2048 - ACTION_OVERHEAD_TOKENS
    assert content_limit(1) == 1


def test_the_schema_and_the_parser_hold_contents_to_the_limit_given():
    schema = action_schema((ANSWER,), max_content=1500)
    assert schema["oneOf"][0]["properties"]["content"]["maxLength"] == 1500
    assert parse_action(answer("x" * 1500), (ANSWER,), max_content=1500) == Action(ANSWER, "x" * 1500, 0.9)
    assert isinstance(parse_action(answer("x" * 1501), (ANSWER,), max_content=1500), Malformed)
    assert isinstance(parse_action(answer("x" * (MAX_CONTENT + 1)), (ANSWER,)), Malformed)  # the default stays


def test_each_brain_has_a_default_budget_and_one_given_is_kept():
    assert max_tokens_for("vllm", None) == 2048
    assert max_tokens_for("openai", None) == 2048
    assert max_tokens_for("llamacpp", None) == MAX_ACTION_TOKENS
    assert max_tokens_for("scripted", None) == MAX_ACTION_TOKENS
    assert max_tokens_for("scripted", 4096) == 4096
    assert max_tokens_for("vllm", MB) == MB  # an output larger than an event travels as an artifact


@pytest.mark.parametrize(
    ("brain", "tokens", "says"),
    [
        ("scripted", ACTION_OVERHEAD_TOKENS, "no room for an action's content"),
        ("llamacpp", LLAMACPP_CONTEXT - PROMPT_ROOM + 1, f"at most {LLAMACPP_CONTEXT - PROMPT_ROOM}"),
    ],
)
def test_a_budget_an_action_cannot_fit_is_a_configuration_error(brain, tokens, says):
    with pytest.raises(ConfigError, match=says):
        max_tokens_for(brain, tokens)


@pytest.fixture
def spawn(settings, agent_id, tmp_path):
    yield from spawner(settings, agent_id, slot_of(settings, agent_id), tmp_path)


@pytest.mark.parametrize(
    ("budget", "task_tokens", "completes"),
    [((), None, False), (("--max-tokens", "2048"), None, True), ((), 2048, True)],
    ids=["agent-default", "agent-2048", "task-2048"],
)
async def test_a_long_output_travels_whole_when_the_budget_allows_it(
    settings, agent_id, spawn, tmp_path, budget, task_tokens, completes
):
    long = "def solve(xs):\n" + "    total = sum(x * x for x in xs)  # squares\n" * 40  # ~1,900 characters
    model = tmp_path / "long.json"
    model.write_text(json.dumps({"script": [answer(long)]}))
    slot = slot_of(settings, agent_id)
    async with Log(settings, topics.TASK_EVENTS, topics.REGISTRY) as log:
        process = spawn("--brain", "scripted", "--model", str(model), *budget)
        await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
        task = task_assigned(agent_id, slot, "Write the function.", max_steps=1, max_tokens=task_tokens)
        await send_inbox(settings, slot, task)
        closed = (TaskCompleted, TaskFailed)
        await log.wait_for(lambda: log.named(*closed, mission_id=task.mission_id), timeout_s=60)
        assert stop_agent(process) == 0
    (outcome,) = log.named(*closed, mission_id=task.mission_id)
    if completes:
        assert isinstance(outcome, TaskCompleted) and outcome.output == long
        # How the answer was sampled is recorded with it: the agent's temperature and its own seed.
        assert (outcome.temperature, outcome.seed) == (TEMPERATURE, zlib.crc32(agent_id.encode()))
    else:  # the default budget: the same output is longer than the content an action may have
        assert isinstance(outcome, TaskFailed) and outcome.failure == "MALFORMED_OUTPUT"
        assert f"at most {MAX_CONTENT} characters" in (outcome.detail or "")


async def test_the_task_s_max_tokens_reaches_the_brain_and_the_agent_s_serves_a_task_without_one(
    settings, agent_id, spawn, tmp_path
):
    model = tmp_path / "echo.json"
    model.write_text(json.dumps({"script": [answer("allowed {max_tokens}")]}))
    slot = slot_of(settings, agent_id)
    async with Log(settings, topics.TASK_EVENTS, topics.REGISTRY) as log:
        process = spawn("--brain", "scripted", "--model", str(model), "--max-tokens", "600")
        await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
        tasks = [task_assigned(agent_id, slot, "Say it.", max_steps=1, max_tokens=tokens) for tokens in (777, None)]
        await send_inbox(settings, slot, *tasks)
        done = lambda: all(log.named(TaskCompleted, mission_id=task.mission_id) for task in tasks)
        await log.wait_for(done, timeout_s=60)
        assert stop_agent(process) == 0
    outputs = [log.named(TaskCompleted, mission_id=task.mission_id)[0].output for task in tasks]
    assert outputs == ["allowed 777", "allowed 600"]


async def test_an_input_whose_artifact_cannot_be_read_fails_the_task_saying_so(settings, agent_id, spawn):
    missing = ArtifactRef.of(b"never stored anywhere " + agent_id.encode())
    slot = slot_of(settings, agent_id)
    async with Log(settings, topics.TASK_EVENTS, topics.REGISTRY) as log:
        process = spawn("--brain", "scripted")
        await log.wait_for(lambda: log.named(AgentRegistered, agent_id=agent_id), timeout_s=60)
        task = msgspec.structs.replace(
            task_assigned(agent_id, slot, "Review it.", max_steps=1), inputs={"write": str(missing)}
        )
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: log.named(TaskFailed, mission_id=task.mission_id), timeout_s=60)
        assert stop_agent(process) == 0  # the agent goes on: no crash
    (failed,) = log.named(TaskFailed, mission_id=task.mission_id)
    assert failed.failure == "GAVE_UP" and f"artifact {missing} is not in" in failed.detail
