"""Brains: one interface over the models an agent can think with; each adapter is imported only when chosen."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from swarmlog.errors import ConfigError

BRAINS = ("llamacpp", "scripted", "openai", "vllm")


@dataclasses.dataclass(frozen=True, slots=True)
class Generation:
    """A model's output and what it cost."""

    text: str
    prompt_tokens: int
    completion_tokens: int


class Brain(Protocol):
    """Generates text constrained to a JSON schema; blocking model calls run off the event loop."""

    model: str

    async def generate(self, prompt: str, json_schema: Mapping[str, Any], max_tokens: int) -> Generation:
        """One generation of at most max_tokens tokens whose text matches json_schema."""

    def close(self) -> None:
        """Release the model; safe to call twice."""


def open_brain(kind: str, model: str | None = None, gpu: int | None = None, seed: int = 0) -> Brain:
    """The brain of that kind, sampling with `seed`; ConfigError naming the kinds when it is unknown."""
    if kind not in BRAINS:
        raise ConfigError(f"unknown brain {kind!r}; use one of {', '.join(BRAINS)}")
    module = importlib.import_module(f"swarmlog.actors.brains.{kind}")
    brain: Brain = module.open(model, gpu, seed)
    return brain
