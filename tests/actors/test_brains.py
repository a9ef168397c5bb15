"""Each brain answers within the action schema; those that cannot run here skip with the exact reason."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import subprocess
import sys
import time

import pytest

from swarmlog.actors.actions import ANSWER, FAIL, MAX_ACTION_TOKENS, VOTE, Action, action_schema, parse_action
from swarmlog.actors.brains import TEMPERATURE, open_brain
from swarmlog.actors.brains.llamacpp import default_model
from swarmlog.actors.brains.openai import OpenAIBrain
from swarmlog.actors.brains.scripted import ScriptedBrain
from swarmlog.errors import ConfigError, ServiceError

needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: pip install 'swarmlog[llamacpp]'",
)


def _server_missing() -> str | None:
    """Why llama-cpp-python's OpenAI-compatible server cannot run here, or None."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as exc:
        return f"llama_cpp.server needs the [server] extras: {exc}"
    return None


async def test_the_scripted_brain_replays_its_script_and_otherwise_answers_the_schema():
    brain = ScriptedBrain(script=["a", "b"])
    assert [(await brain.generate("p", action_schema(), 10)).text for _ in range(3)] == ["a", "b", "a"]
    default = ScriptedBrain()
    assert parse_action((await default.generate("p", action_schema((ANSWER,)), 10)).text) == Action(
        ANSWER, "scripted", 1.0
    )
    vote = await default.generate("p", action_schema((VOTE,), ("c2", "c1")), 10)
    assert parse_action(vote.text, (VOTE,), ("c2", "c1")).candidate_id == "c2"


async def test_scripted_brains_with_several_answers_disagree_and_stay_valid_actions():
    async def answer(brain: ScriptedBrain) -> str:
        return parse_action((await brain.generate("p", action_schema((ANSWER,)), 10)).text, (ANSWER,)).content

    several = {await answer(ScriptedBrain(answers=3, seed=seed)) for seed in range(12)}
    assert len(several) > 1 and several <= {f"scripted answer {k}" for k in range(3)}
    assert {await answer(ScriptedBrain(seed=seed)) for seed in range(4)} == {"scripted"}, "one answer unless asked"


async def test_each_brain_reports_the_temperature_and_seed_it_sampled_with(monkeypatch: pytest.MonkeyPatch):
    scripted = await ScriptedBrain(seed=41).generate("p", action_schema((ANSWER,)), 10)
    assert (scripted.temperature, scripted.seed) == (TEMPERATURE, 41)
    sent: list[dict] = []

    def post(body: dict) -> dict:
        sent.append(body)
        return {"choices": [{"message": {"content": "{}"}}], "usage": {"prompt_tokens": 3, "completion_tokens": 1}}

    brain = OpenAIBrain("m", "http://127.0.0.1:1/v1", None, seed=99)
    monkeypatch.setattr(brain, "_post", post)
    served = await brain.generate("p", action_schema((ANSWER,)), 10)
    assert (served.temperature, served.seed) == (sent[0]["temperature"], sent[0]["seed"]) == (TEMPERATURE, 99)


async def test_the_scripted_brain_waits_its_sampled_latency():
    async def latencies(seed: int) -> list[float]:
        brain, out = ScriptedBrain(median_ms=5, sigma=0.5, seed=seed), []
        for _ in range(3):
            start = time.monotonic()
            await brain.generate("p", action_schema(), 1)
            out.append(time.monotonic() - start)
        return out

    assert min(await latencies(1)) > 0.001


def test_an_unknown_brain_is_a_config_error():
    with pytest.raises(ConfigError, match="use one of llamacpp, scripted, openai, vllm"):
        open_brain("gpt")


@needs_llama
async def test_llamacpp_output_is_always_a_valid_action_and_a_vote_names_a_candidate():
    brain = open_brain("llamacpp")
    try:
        tokens, seconds = 0, 0.0
        for question in ("What is 2+2?", "Name a planet.", "Say hello."):
            start = time.monotonic()
            generation = await brain.generate(f"Task: {question}", action_schema((ANSWER, FAIL)), MAX_ACTION_TOKENS)
            seconds += time.monotonic() - start
            tokens += generation.completion_tokens
            assert isinstance(parse_action(generation.text, (ANSWER, FAIL)), Action), generation.text
            assert (generation.temperature, generation.seed) == (TEMPERATURE, 0), "it reports the sampling it used"
        vote = await brain.generate(
            "Which is right, c1: 4 or c2: 5?", action_schema((VOTE,), ("c1", "c2")), MAX_ACTION_TOKENS
        )
        assert parse_action(vote.text, (VOTE,), ("c1", "c2")).candidate_id in ("c1", "c2")
        print(f"llama.cpp: {tokens / seconds:.0f} completion tokens/s")
    finally:
        brain.close()


@pytest.mark.skipif(_server_missing() is not None, reason=str(_server_missing()))
async def test_the_openai_brain_against_llama_cpp_server(unused_tcp_port):
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(default_model()),
            "--port",
            str(unused_tcp_port),
            "--n_threads",
            "2",
        ]
    )
    try:
        brain = OpenAIBrain("smollm2", f"http://127.0.0.1:{unused_tcp_port}/v1")
        generation = None
        for _ in range(100):
            with contextlib.suppress(ServiceError):
                generation = await brain.generate("Task: What is 2+2?", action_schema((ANSWER,)), MAX_ACTION_TOKENS)
                break
            await asyncio.sleep(0.3)
        assert generation is not None, "llama_cpp.server never answered"
        assert isinstance(parse_action(generation.text, (ANSWER,)), Action), generation.text
    finally:
        server.terminate()
        server.wait(30)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is importable: tests/vllm_brain run it")
def test_an_agent_on_the_vllm_brain_without_vllm_says_how_to_get_it():
    agent = [sys.executable, "-m", "swarmlog", "agent", "a", "--brain", "vllm", "--bootstrap", "127.0.0.1:1"]
    run = subprocess.run(agent, capture_output=True, text=True, timeout=120)
    assert run.returncode == 3, run.stderr
    assert "run `make vllm`, then start the agent with .venv-vllm/bin/swarmlog" in run.stderr
