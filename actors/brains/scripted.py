"""A deterministic brain for coordination benchmarks and fault injection: scripted outputs, seeded latency."""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import itertools
import json
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from swarmlog.actors.brains import TEMPERATURE, Generation

MAX_TOKENS = "{max_tokens}"
"""In a script's text, replaced by the max_tokens of the generation."""


@dataclasses.dataclass
class ScriptedBrain:
    """Replies with the script's texts in turn (or the first valid action of the schema, its text one of `answers`
    drawn from the seed, so replicas disagree as often as `answers` makes them), after a log-normal delay."""

    script: Sequence[str] = ()
    median_ms: float = 0.0
    sigma: float = 0.0
    seed: int = 0
    model: str = "scripted"
    segfault_at: int | None = None  # the generation (0-based) at which the process dies of SIGSEGV, as a crashing model
    answers: int = 1
    temperature: float = TEMPERATURE
    """The temperature it reports: it has no logits, and draws its answer uniformly with its seed."""

    def __post_init__(self) -> None:
        self._random = random.Random(self.seed)
        self._texts: Iterator[str] | None = itertools.cycle(self.script) if self.script else None
        self._generations = itertools.count()

    async def generate(self, prompt: str, json_schema: Mapping[str, Any], max_tokens: int) -> Generation:
        """The next scripted text, after the sampled latency."""
        if next(self._generations) == self.segfault_at:
            ctypes.string_at(0)  # a real invalid read: the kernel sends SIGSEGV, as to a native model that crashes
        if self.median_ms:
            await asyncio.sleep(self.median_ms * self._random.lognormvariate(0.0, self.sigma) / 1000)
        answer = f"scripted answer {self._random.randrange(self.answers)}" if self.answers > 1 else "scripted"
        # A script's "{max_tokens}" says what the generation was allowed, so tests see the budget that reached it.
        text = (
            next(self._texts).replace(MAX_TOKENS, str(max_tokens))
            if self._texts
            else json.dumps(first_instance(json_schema, answer))
        )
        return Generation(text, len(prompt.split()), len(text.split()), temperature=self.temperature, seed=self.seed)

    def close(self) -> None:
        """Nothing to release."""


def first_instance(json_schema: Mapping[str, Any], text: str = "scripted") -> dict[str, Any]:
    """A valid instance of an action schema's first variant: const/enum first choice, `text`, 1.0."""
    properties = json_schema["oneOf"][0]["properties"]
    values = {"string": text, "number": 1.0}
    return {
        name: prop["const"] if "const" in prop else prop["enum"][0] if "enum" in prop else values[prop["type"]]
        for name, prop in properties.items()
    }


def open(model: str | None, gpu: int | None, seed: int = 0) -> ScriptedBrain:
    """A scripted brain from a JSON file {"script": [...], "median_ms", "sigma", "seed", "segfault_at", "answers",
    "temperature"} (seed defaults to `seed`)."""
    if model is None:
        return ScriptedBrain(seed=seed)
    return ScriptedBrain(**({"seed": seed} | json.loads(Path(model).read_text())), model=Path(model).name)
