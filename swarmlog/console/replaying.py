"""The Replay page's reads: a component's state folded from the log up to an offset or a time, by the live processes'
own folds (`swarmlog.replay`), next to the console's live state of it where the console holds one, else next to the
same fold run to the log's end (what changed since then, for the coordinator, agents and memory)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from swarmlog.console import pages
from swarmlog.console.view import ConsoleView
from swarmlog.errors import ConfigError
from swarmlog.replay.components import COMPONENTS, Component, component
from swarmlog.replay.fold import Replayed, replay
from swarmlog.replay.source import Span, read
from swarmlog.schemas.codec import codec_for
from swarmlog.settings import Settings

READ_TIMEOUT_S = 60.0
EPOCH_MS_FROM = 10**12
"""An `at` from here on is epoch milliseconds, below it an offset (as `swarmlog replay state --at`)."""
LIVE: dict[str, Callable[[ConsoleView], Any]] = {
    "registry": lambda view: view.registry,
    "waitgraph": lambda view: view.waits,
    "budgets": lambda view: view.budgets,
}
"""The components the console folds live itself, and where its view holds each."""
LIVE_STATE = "the console's live state"
LOG_END = "the log's end"
NAMES = tuple(COMPONENTS)


def span(at: str | None) -> Span:
    """`at`: none (now), an offset (a whole number below EPOCH_MS_FROM), epoch milliseconds or an ISO-8601 time."""
    if not at:
        return Span()
    if at.isdigit():
        value = int(at)
        return Span(to_offset=value) if value < EPOCH_MS_FROM else Span(to_ms=value)
    try:
        moment = datetime.fromisoformat(at)
    except ValueError:
        raise ConfigError(f"at={at!r} is neither an offset, epoch milliseconds nor an ISO-8601 time") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return Span(to_ms=int(moment.timestamp() * 1000))


class Replays:
    """One replay at a time (each reads whole topics), each bounded by READ_TIMEOUT_S."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._one = asyncio.Lock()

    async def state(self, live: ConsoleView, name: str, key: str | None, at: str | None) -> dict[str, Any]:
        """The component's entries at `at`, next to its live entries where the console has them, else (for an `at`) to
        its entries at the log's end, and how they differ; a ConfigError for a component, key or time that names
        nothing."""
        regions = self.settings.region_names
        try:
            chosen = component(name)
            partitions = chosen.partitions(chosen.resolve(key, regions), regions)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        only = {topic: partitions for topic in chosen.topics} if partitions else None
        async with self._one:
            folded, notes = await self._fold(chosen, key, span(at), only)
            if name in LIVE:
                current, against = chosen.view(LIVE[name](live), key), LIVE_STATE
            elif at:
                current, against = chosen.view((await self._fold(chosen, key, Span(), only))[0].state, key), LOG_END
            else:
                current, against = None, None  # folded to the log's end already
        entries = chosen.view(folded.state, key)
        return {
            "component": name,
            "key": key,
            "at": at,
            "against": against,
            "events": folded.events,
            "notes": list(notes),
            "problems": [f"{p.topic}[{p.partition}]@{p.offset}: {p.reason}" for p in folded.problems],
            **pages.compared(entries, current),
        }

    async def _fold(
        self, chosen: Component, key: str | None, until: Span, only: Mapping[str, Iterable[int]] | None
    ) -> tuple[Replayed, tuple[str, ...]]:
        """The component's fold over its topics up to `until`, and the read's notes."""
        reading = await read(self.settings, chosen.topics, until, only, timeout_s=READ_TIMEOUT_S)
        codec = codec_for(self.settings.schema_registry_url)
        folded = await asyncio.to_thread(replay, chosen, key, self.settings.region_names, reading.records, codec)
        return folded, reading.notes
