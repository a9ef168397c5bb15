"""Brains: one interface over the models an agent can think with; each adapter is imported only when chosen."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any, Protocol

from swarmlog.actors.actions import ACTION_OVERHEAD_TOKENS, MAX_ACTION_TOKENS
from swarmlog.errors import ConfigError


@dataclasses.dataclass(frozen=True, slots=True)
class ContextWindow:
    """A brain's context window: the prompt and the output share its tokens."""

    label: str
    """The brain as messages name it."""
    tokens: int
    prompt_room: int
    """Tokens of the context kept for the prompt."""

    @property
    def output_room(self) -> int:
        """The most tokens an output may take."""
        return self.tokens - self.prompt_room


LLAMACPP_CONTEXT = 2048
"""The llama.cpp brain's context window (tokens)."""
PROMPT_ROOM = 512
"""Tokens of the llama.cpp context kept for the prompt."""
CONTEXT_WINDOWS: Mapping[str, ContextWindow | None] = {
    "llamacpp": ContextWindow("llama.cpp", LLAMACPP_CONTEXT, PROMPT_ROOM),
    "scripted": None,
    "openai": None,
    "vllm": None,
}
"""Each brain's context window where it limits the output; None where nothing here does (a server enforces its own)."""
BRAINS = tuple(CONTEXT_WINDOWS)
SYSTEM = "You are one agent of a swarm. Reply with exactly one JSON object, as asked."
"""The system message of the brains that format chat messages themselves (llama.cpp, vLLM)."""
TEMPERATURE = 0.2
"""Every brain samples at this temperature, each agent with its own seed: replicas are independent draws."""
DEFAULT_MAX_TOKENS = {"vllm": 2048, "openai": 2048}
"""Tokens a generation may take by default, per brain: the seed's 2,048 where a GPU serves the model; elsewhere
MAX_ACTION_TOKENS (a 300-character content), which a small model on a CPU core generates in seconds."""


def max_tokens_for(brain: str, asked: int | None) -> int:
    """The tokens a generation of `brain` may take: `asked`, else the brain's default; a ConfigError when an action
    would not fit (too few tokens, or more than the brain's context leaves). An output larger than an event travels
    as an artifact's reference."""
    tokens = asked if asked is not None else DEFAULT_MAX_TOKENS.get(brain, MAX_ACTION_TOKENS)
    if tokens <= ACTION_OVERHEAD_TOKENS:
        raise ConfigError(
            f"--max-tokens {tokens} leaves no room for an action's content; give more than {ACTION_OVERHEAD_TOKENS}"
        )
    context = CONTEXT_WINDOWS.get(brain)
    if context is not None and tokens > context.output_room:
        raise ConfigError(
            f"--max-tokens {tokens} does not fit the {context.label} brain's {context.tokens}-token context with room "
            f"for the prompt; give at most {context.output_room}"
        )
    return tokens


def task_tokens(brain: str, agent_tokens: int, asked: int | None) -> int:
    """The tokens a task's generations may take on this agent: the task's `asked` (its spec's max_tokens), else the
    agent's own; held to what the brain's context leaves for the output (the coordinator checked the task's bounds,
    not every brain's window)."""
    if asked is None:
        return agent_tokens
    context = CONTEXT_WINDOWS.get(brain)
    return asked if context is None else min(asked, context.output_room)


@dataclasses.dataclass(frozen=True, slots=True)
class Generation:
    """A model's output, what it cost, and how it was sampled (the events record both: a replica's draw is
    reproducible only with its temperature and seed)."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    temperature: float | None = None
    """The temperature the model sampled at; None when no model ran (a model error's stand-in)."""
    seed: int | None = None
    """The seed the model sampled with; None when no model ran."""


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
