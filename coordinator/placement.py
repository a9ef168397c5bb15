"""Which region owns a mission that names none: a stable hash of its id over the region list."""

from __future__ import annotations

import zlib

TOP = "top"
"""The reserved region name of a mission for the top level (`swarmlog top`), which splits it across the regions; no
regional coordinator takes it."""


def owner(mission_id: str, regions: tuple[str, ...]) -> str:
    """The region that owns the mission (CRC-32 of its id modulo the number of regions)."""
    return regions[zlib.crc32(mission_id.encode()) % len(regions)]
