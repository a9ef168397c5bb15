"""One vLLM AsyncLLMEngine in this process (one GPU per agent), with JSON-schema structured outputs."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping
from typing import Any

from swarmlog.actors.brains import Generation
from swarmlog.errors import ConfigError


class VllmBrain:
    """Generates through an in-process AsyncLLMEngine; requests are batched by the engine, not serialised."""

    def __init__(self, model: str, seed: int = 0) -> None:
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine, SamplingParams
            from vllm.sampling_params import StructuredOutputsParams
        except ImportError as exc:
            raise ConfigError(f"the vllm brain needs vLLM: pip install 'swarmlog[vllm]' ({exc})") from exc
        self.model = model
        self._params: Callable[[dict[str, Any], int], Any] = lambda schema, max_tokens: SamplingParams(
            max_tokens=max_tokens,
            temperature=0.2,
            seed=seed,
            structured_outputs=StructuredOutputsParams(json=json.dumps(schema)),
        )
        self._engine = AsyncLLMEngine.from_engine_args(AsyncEngineArgs(model=model))
        self._ids = itertools.count()

    async def generate(self, prompt: str, json_schema: Mapping[str, Any], max_tokens: int) -> Generation:
        """The final output of one request."""
        final = None
        async for output in self._engine.generate(
            prompt, self._params(dict(json_schema), max_tokens), f"agent-{next(self._ids)}"
        ):
            final = output
        assert final is not None, "vLLM returned no output"
        return Generation(final.outputs[0].text, len(final.prompt_token_ids or ()), len(final.outputs[0].token_ids))

    def close(self) -> None:
        """Shut the engine down (vLLM asks for this before the engine is dropped)."""
        self._engine.shutdown()


def open(model: str | None, gpu: int | None, seed: int = 0) -> VllmBrain:
    """vLLM on `model` (a Hugging Face id or a local folder); the GPU is chosen with CUDA_VISIBLE_DEVICES."""
    if not model:
        raise ConfigError("the vllm brain needs --model (a Hugging Face id or a local model folder)")
    return VllmBrain(model, seed)
