"""Which region owns a mission that names none: a stable hash of its id over the region list."""

from __future__ import annotations

import zlib


def owner(mission_id: str, regions: tuple[str, ...]) -> str:
    """The region that owns the mission (CRC-32 of its id modulo the number of regions)."""
    return regions[zlib.crc32(mission_id.encode()) % len(regions)]
