"""Rebuild versus live: the coordinator's rocksdict snapshot, or a Faust table read back from its changelog topic."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from faust.serializers import codecs

from swarmlog.streams.app.tables import load_value
from swarmlog.coordinator.shell import folded as snapshots
from swarmlog.errors import SwarmlogError
from swarmlog.replay.components import JOURNAL, component
from swarmlog.replay.fold import Problem, replay
from swarmlog.replay.source import Span, read
from swarmlog.settings import Settings


@dataclasses.dataclass(frozen=True, slots=True)
class Difference:
    """One entry whose rebuilt and live values differ (None: absent on that side)."""

    key: str
    rebuilt: Any
    live: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """What a diff compared, up to where, what differs, and the records that did not decode."""

    component: str
    live: str
    events: int
    differences: tuple[Difference, ...]
    problems: tuple[Problem, ...]


def differences(rebuilt: dict[str, Any], live: dict[str, Any]) -> tuple[Difference, ...]:
    """Every entry, in key order, that is not the same on both sides."""
    return tuple(Difference(key, rebuilt.get(key), live.get(key)) for key in sorted(rebuilt.keys() | live.keys())
                 if rebuilt.get(key) != live.get(key))


async def diff_coordinator(settings: Settings, region: str, data_dir: Path) -> Comparison:
    """The region's journal folded up to its snapshot's offset, against the snapshot under data_dir/region."""
    coordinator = component("coordinator")
    region = coordinator.resolve(region, settings.region_names)
    path = data_dir / region
    snapshot = snapshots.load(path) if path.exists() else None
    if snapshot is None:
        raise SwarmlogError(f"no coordinator snapshot under {path}; pass --data-dir where `swarmlog coordinator` "
                            "keeps it (default <cache dir>/coordinator)")
    partition = settings.region_names.index(region)
    reading = await read(settings, [JOURNAL], Span(to_offset=snapshot.offset), {JOURNAL: [partition]})
    rebuilt = replay(coordinator, region, settings.region_names, reading.records)
    return Comparison("coordinator", f"snapshot {path} @ offset {snapshot.offset}", rebuilt.events,
                      differences(coordinator.view(rebuilt.state), coordinator.view(snapshot.state)),
                      rebuilt.problems)


async def diff_table(settings: Settings, name: str, app_id: str) -> Comparison:
    """The component folded from its topics to their ends, against its Faust table read from the changelog."""
    table = component(name)
    if table.table is None or table.from_table is None:
        raise SwarmlogError(f"{name} has no live table to compare with; diff coordinator, registry, waitgraph or "
                            "budgets")
    changelog = f"{app_id}-{table.table}-changelog"
    live, unreadable = await read_table(settings, changelog)
    reading = await read(settings, table.topics)
    rebuilt = replay(table, None, settings.region_names, reading.records)
    return Comparison(name, f"changelog {changelog}", rebuilt.events,
                      differences(table.view(rebuilt.state), table.view(table.from_table(live))),
                      rebuilt.problems + unreadable)


async def read_table(settings: Settings, changelog: str) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    """A Faust table's contents from its changelog (JSON keys, pickled fold records; the latest value per key wins),
    and the records that are not a table row, with their coordinates (their keys then read as absent)."""
    values: dict[str, Any] = {}
    problems: list[Problem] = []
    for record in (await read(settings, [changelog])).records:
        try:
            key = codecs.loads("json", record.key)
            value = None if record.value is None else load_value(record.value)
        except (ValueError, TypeError) as exc:
            problems.append(Problem(record.topic, record.partition, record.offset, f"not a table row: {exc}"))
            continue
        if value is None:
            values.pop(key, None)
        else:
            values[key] = value
    return values, tuple(problems)

