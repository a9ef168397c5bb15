"""The action a model emits each step: its JSON schema (for constrained decoding) and a parser that never raises."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from typing import Any

ANSWER, ASK, REMEMBER, RECALL, VOTE, FAIL = "answer", "ask", "remember", "recall", "vote", "fail"
ACTIONS = (ANSWER, ASK, REMEMBER, RECALL, VOTE, FAIL)
MAX_CONTENT = 300
MAX_TARGET = 64
ACTION_OVERHEAD_TOKENS = MAX_TARGET + 64
"""What an action needs besides its content: its keys, kind, confidence and an ask's target."""
# Enough tokens for any schema-valid action of ASCII text (a token covers at least one character), so constrained
# output is never cut short into malformed JSON.
MAX_ACTION_TOKENS = MAX_CONTENT + ACTION_OVERHEAD_TOKENS


def content_limit(max_tokens: int) -> int:
    """The longest content (characters) an action of at most `max_tokens` tokens is allowed, so that every
    schema-valid action fits; at least 1."""
    return max(1, max_tokens - ACTION_OVERHEAD_TOKENS)


@dataclasses.dataclass(frozen=True, slots=True)
class Action:
    """One valid action: its kind, content and confidence; `target` for ask, `candidate_id` for vote."""

    kind: str
    content: str
    confidence: float
    target: str | None = None
    candidate_id: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Malformed:
    """Model output that is not a valid action, and why."""

    reason: str


def action_schema(
    allowed: Sequence[str] = ACTIONS,
    candidates: Sequence[str] = (),
    targets: Sequence[str] = (),
    max_content: int = MAX_CONTENT,
) -> dict[str, Any]:
    """The JSON schema of the allowed actions with contents of at most `max_content` characters; a vote's
    candidate_id is one of `candidates`, an ask's target one of `targets`, when given."""
    return {"oneOf": [_variant(kind, candidates, targets, max_content) for kind in allowed]}


def _variant(
    kind: str, candidates: Sequence[str], targets: Sequence[str] = (), max_content: int = MAX_CONTENT
) -> dict[str, Any]:
    """The object schema of one action kind (the "action" key first, so decoding commits to a kind early)."""
    properties: dict[str, Any] = {
        "action": {"const": kind},
        "content": {"type": "string", "maxLength": max_content},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    }
    if kind == ASK:
        properties["target"] = (
            {"enum": list(targets)} if targets else {"type": "string", "minLength": 1, "maxLength": MAX_TARGET}
        )
    if kind == VOTE:
        properties["candidate_id"] = {"enum": list(candidates)} if candidates else {"type": "string", "minLength": 1}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def parse_action(
    text: str,
    allowed: Sequence[str] = ACTIONS,
    candidates: Sequence[str] = (),
    targets: Sequence[str] = (),
    max_content: int = MAX_CONTENT,
) -> Action | Malformed:
    """The action in a model's output, or Malformed saying why not; confidence is clamped into [0, 1]."""
    try:
        # strict=False: llama.cpp's JSON grammar lets raw newlines and tabs into strings; they are still one action.
        value = json.loads(text, strict=False)
    except (ValueError, RecursionError) as exc:
        return Malformed(f"not JSON: {exc}")
    if not isinstance(value, dict):
        return Malformed(f"expected a JSON object, got {type(value).__name__}")
    kind = value.get("action")
    if not isinstance(kind, str) or kind not in allowed:
        return Malformed(f"action {kind!r} is not one of {', '.join(allowed)}")
    expected = set(_variant(kind, candidates)["properties"])
    if value.keys() != expected:
        return Malformed(
            f"{kind} needs exactly the fields {', '.join(sorted(expected))}, got {', '.join(sorted(value))}"
        )
    content, confidence = value["content"], value["confidence"]
    if not isinstance(content, str) or len(content) > max_content:
        return Malformed(f"content must be a string of at most {max_content} characters")
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not math.isfinite(confidence):
        return Malformed(f"confidence must be a finite number, got {confidence!r}")
    target, candidate = value.get("target"), value.get("candidate_id")
    if kind == ASK and not (isinstance(target, str) and 0 < len(target) <= MAX_TARGET):
        return Malformed("ask needs a target agent id")
    if kind == ASK and targets and target not in targets:
        return Malformed(f"ask of unknown peer {target!r}")
    if kind == VOTE and not (isinstance(candidate, str) and candidate and (not candidates or candidate in candidates)):
        return Malformed(f"vote for unknown candidate {candidate!r}")
    return Action(kind, content, min(1.0, max(0.0, float(confidence))), target, candidate)
