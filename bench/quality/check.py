"""The quality task set and its checker, pure: extract an answer from an agent's output, normalise it, compare.

An agent's output is the content of its answer action (TaskCompleted.output), free text such as "12 + 30 = 42" or
"The capital of France is Paris." Each task names its check:
- number: the answer is the last number in the text ("12 + 30 = 42" → 42); none is malformed;
- word: right when the expected word is one of the text's words (case and punctuation aside), else wrong; a text
  without words is malformed;
- choice: the answer is the one option among the text's words; none, or several different ones, is malformed.
A task with no output at all (it failed on every replica, or the mission failed) is malformed.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from enum import Enum
from pathlib import Path

TASKS = Path(__file__).with_name("tasks.jsonl")
CHECKS = ("number", "word", "choice")
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
WORD = re.compile(r"[a-z0-9]+")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One task of the set: its id, the prompt the agent gets, the expected answer and how it is checked."""

    id: str
    prompt: str
    answer: str
    check: str
    options: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        """The family the id names (add, units, fact, ...)."""
        return self.id.split("-")[0]


class Verdict(Enum):
    """A checked answer: right, wrong, or malformed (nothing of the expected shape to extract)."""

    RIGHT = "right"
    WRONG = "wrong"
    MALFORMED = "malformed"


def load(path: Path = TASKS) -> list[Problem]:
    """The problems of a JSONL task set, in file order; ValueError naming the line of an invalid one."""
    problems = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fields = json.loads(line)
        problem = Problem(**{**fields, "options": tuple(fields.get("options", ()))})
        if problem.check not in CHECKS or (problem.check == "choice") != bool(problem.options):
            raise ValueError(f"{path}:{number}: check must be one of {CHECKS}, with options exactly for choice")
        problems.append(problem)
    return problems


def words(text: str) -> list[str]:
    """The text's words, lowercased, punctuation dropped."""
    return WORD.findall(text.lower())


def extract(problem: Problem, output: str | None) -> str | None:
    """The answer in an output, normalised (a number without commas or trailing zeros, a lowercase word), or None
    when there is none to extract (malformed)."""
    if output is None:
        return None
    if problem.check == "number":
        found = NUMBER.findall(output.replace(",", ""))
        return _number(found[-1]) if found else None
    said = words(output)
    if problem.check == "word":
        return problem.answer if problem.answer in said else (said[0] if said else None)
    chosen = {option for option in problem.options if option in said}
    return chosen.pop() if len(chosen) == 1 else None


def _number(text: str) -> str:
    """A number's canonical text: 42.0 → 42, 0.50 → 0.5."""
    value = float(text)
    return str(int(value)) if value.is_integer() else repr(value)


def verdict(problem: Problem, output: str | None) -> Verdict:
    """Whether the output answers the problem right, wrong, or malformed."""
    answer = extract(problem, output)
    if answer is None:
        return Verdict.MALFORMED
    if problem.check == "number":
        return Verdict.RIGHT if math.isclose(float(answer), float(problem.answer)) else Verdict.WRONG
    return Verdict.RIGHT if answer == problem.answer else Verdict.WRONG


def wilson(failures: int, total: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95 % by default); (0, 1) with no trials."""
    if total == 0:
        return 0.0, 1.0
    p = failures / total
    centre = (p + z * z / (2 * total)) / (1 + z * z / total)
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / (1 + z * z / total)
    return max(0.0, centre - half), min(1.0, centre + half)
