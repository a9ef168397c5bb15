"""Experiences as agents record them, with real embeddings: for the memory tests."""

from __future__ import annotations

import uuid

from swarmlog.actors.memory.embeddings import MiniLM
from swarmlog.envelope import now_ms
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import from_fields


def recorded(
    model: MiniLM, content: str, *, ttl_s: int = 3600, at_ms: int | None = None, experience_id: str | None = None
) -> Event:
    """An ExperienceRecorded of `content` with its real embedding."""
    experience_id = experience_id or uuid.uuid4().hex
    return from_fields(
        "ExperienceRecorded",
        {
            "event_id": experience_id,
            "occurred_at": now_ms() if at_ms is None else at_ms,
            "correlation_id": None,
            "causation_id": None,
            "producer": "agent:test",
            "experience_id": experience_id,
            "agent_id": "test",
            "node": "n1",
            "kind": "remember",
            "content": content,
            "embedding": model.embed([content])[0].tolist(),
            "ttl_s": ttl_s,
            "mission_id": None,
        },
    )
