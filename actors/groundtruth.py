"""The ground truth an agent works from, pure: the latest version of its document, folded from the compacted topic."""

from __future__ import annotations

import dataclasses

from swarmlog.schemas.events import Event
from swarmlog.schemas.records import GroundTruthUpdated

DEFAULT_DOCUMENT = "main"


@dataclasses.dataclass(frozen=True, slots=True)
class GroundTruth:
    """One document as the agent last re-synced it; version None until one was ever published."""

    document_id: str = DEFAULT_DOCUMENT
    version: int | None = None
    content: str = ""


def evolve_ground_truth(truth: GroundTruth, event: Event) -> GroundTruth:
    """A newer version of the agent's document replaces the one it holds; anything else changes nothing."""
    if not isinstance(event, GroundTruthUpdated) or event.document_id != truth.document_id:
        return truth
    if truth.version is not None and event.version <= truth.version:
        return truth
    return GroundTruth(truth.document_id, event.version, event.content)
