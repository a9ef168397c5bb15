"""The text an agent's model reads: a task step or a ballot, with everything the agent knows at that point."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from swarmlog.actors.actions import ANSWER, ASK, MAX_CONTENT
from swarmlog.actors.groundtruth import GroundTruth

MAX_TRUTH = 600
"""Characters of the ground-truth document a prompt carries (the model's context is small)."""
MAX_EXCERPT = 4000
"""Characters of an artifact a prompt carries (an input or a candidate too large for an event)."""


def task_prompt(
    prompt: str,
    inputs: Mapping[str, str],
    *,
    memories: Sequence[str] = (),
    truth: GroundTruth | None = None,
    notes: Sequence[str] = (),
    allowed: Sequence[str] = (ANSWER,),
    step: int = 1,
    max_steps: int = 1,
    max_content: int = MAX_CONTENT,
) -> str:
    """The prompt of one step of a task."""
    sections = [f"Task: {prompt}"]
    sections += _listed("Inputs", [f"{name}: {value}" for name, value in sorted(inputs.items())])
    sections += _listed("Recalled memories", memories)
    if truth is not None and truth.version is not None:
        sections.append(f"Ground truth ({truth.document_id}, version {truth.version}): {truth.content[:MAX_TRUTH]}")
    sections += _listed("Your notes so far", notes)
    sections.append(
        f"Step {step} of {max_steps}. Reply with one JSON object with the keys action ({' or '.join(allowed)}), "
        f"content and confidence (0 to 1). The content is your own work on the task, at most {max_content} "
        'characters. Use the action "answer" to give the final answer.'
    )
    if ASK in allowed:
        sections.append(
            'To ask another agent, use the action "ask" with "target" set to its id and the question as '
            "content; its answer appears in your notes."
        )
    return "\n".join(sections)


def excerpt(reference: str, text: str) -> str:
    """How a prompt shows the text of an artifact: whole when short, else its head and what it is the head of."""
    if len(text) <= MAX_EXCERPT:
        return text
    return f"{text[:MAX_EXCERPT]}\n[the first {MAX_EXCERPT} of {len(text)} characters of {reference}]"


def vote_prompt(candidates: Mapping[str, str], question: str | None = None) -> str:
    """The prompt of a ballot: what was asked, when known, then each candidate's output, by candidate id."""
    asked = (
        ["Several agents answered the same task:", question] if question else ["Several agents answered the same task."]
    )
    lines = [*asked, "Candidate answers:"]
    lines += [f"- {candidate_id}: {output}" for candidate_id, output in candidates.items()]
    lines.append(
        'Vote for the best answer. Reply with one JSON object: {"action": "vote", "candidate_id": the id you choose, '
        '"content": why, "confidence": a number from 0 to 1}.'
    )
    return "\n".join(lines)


def _listed(title: str, items: Sequence[str]) -> list[str]:
    """A titled bullet list, or nothing when there are no items."""
    return [f"{title}:", *(f"- {item}" for item in items)] if items else []
