"""Rebuild versus live: the coordinator's rocksdict snapshot, or a Faust table read back from its changelog topic."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from swarmlog.coordinator import State
from swarmlog.coordinator.shell import folded as snapshots
from swarmlog.errors import SwarmlogError
from swarmlog.replay.components import Component, component
from swarmlog.replay.fold import Problem, replay
from swarmlog.replay.source import Span, read
from swarmlog.settings import Settings
from swarmlog.streams.app.tables import latest_rows
from swarmlog.topics import JOURNAL


class NoLiveState(SwarmlogError):
    """There is no live state to compare with where the diff looked (no snapshot, no changelog topic)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Difference:
    """One entry whose rebuilt and live values differ (None: absent on that side)."""

    key: str
    rebuilt: Any
    live: Any


@dataclasses.dataclass(frozen=True, slots=True)
class Comparison:
    """What a diff compared, up to where, what differs, the source records that did not decode, and the live rows
    that did not read."""

    component: str
    live: str
    events: int
    differences: tuple[Difference, ...]
    problems: tuple[Problem, ...]
    live_problems: tuple[Problem, ...] = ()

    @property
    def equal(self) -> bool:
        """Nothing differs and every row on both sides read."""
        return not (self.differences or self.problems or self.live_problems)


@dataclasses.dataclass(frozen=True, slots=True)
class LiveCheck:
    """One component's rebuild against its live state, by counts; `live` is None (and `note` says why) where no
    live state was found."""

    component: str
    key: str
    live: str | None
    differences: int = 0
    unreadable: int = 0
    note: str = ""

    @property
    def equal(self) -> bool:
        """No entry differs and every live row read (true where there was nothing to compare with)."""
        return not (self.differences or self.unreadable)


def differences(rebuilt: dict[str, Any], live: dict[str, Any]) -> tuple[Difference, ...]:
    """Every entry, in key order, that is not the same on both sides."""
    return tuple(
        Difference(key, rebuilt.get(key), live.get(key))
        for key in sorted(rebuilt.keys() | live.keys())
        if rebuilt.get(key) != live.get(key)
    )


async def diff_coordinator(settings: Settings, region: str, data_dir: Path) -> Comparison:
    """The region's journal folded up to its snapshot's offset, against the snapshot under data_dir/region."""
    coordinator = component("coordinator")
    region = coordinator.resolve(region, settings.region_names)
    path = data_dir / region
    snapshot = snapshots.load(path) if path.exists() else None
    if snapshot is None:
        raise NoLiveState(
            f"no coordinator snapshot under {path}; pass --data-dir where `swarmlog coordinator` "
            "keeps it (default <cache dir>/coordinator)"
        )
    partition = settings.region_names.index(region)
    reading = await read(settings, [JOURNAL], Span(to_offset=snapshot.offset), {JOURNAL: [partition]})
    rebuilt = replay(coordinator, region, settings.region_names, reading.records)
    live = _with_flags_of(snapshot.state, rebuilt.state)
    return Comparison(
        "coordinator",
        f"snapshot {path} @ offset {snapshot.offset}",
        rebuilt.events,
        differences(coordinator.view(rebuilt.state), coordinator.view(live)),
        rebuilt.problems,
    )


def _with_flags_of(live: State, rebuilt: State) -> State:
    """The live state with the rebuild's timeouts and inbox size: they are the coordinator's flags and what it found
    at its start, not facts of its journal (each SlotAllocated records the inbox size it was allocated from)."""
    config = dataclasses.replace(
        live.config,
        start_timeout_ms=rebuilt.config.start_timeout_ms,
        retain_ended_ms=rebuilt.config.retain_ended_ms,
        retain_slot_ms=rebuilt.config.retain_slot_ms,
        retain_goodbye_slot_ms=rebuilt.config.retain_goodbye_slot_ms,
        inbox_partitions=rebuilt.config.inbox_partitions,
    )
    return dataclasses.replace(live, config=config)


async def diff_table(settings: Settings, name: str, app_id: str) -> Comparison:
    """The component folded from its topics to their ends, against its Faust table read from the changelog;
    ValueError for a component no table holds."""
    table = component(name)
    if table.table is None or table.from_table is None:
        raise ValueError(f"{name} has no live table to compare with; diff coordinator, registry, waitgraph or budgets")
    changelog = f"{app_id}-{table.table}-changelog"
    live, unreadable = await read_table(settings, changelog, app_id)
    reading = await read(settings, table.topics)
    rebuilt = replay(table, None, settings.region_names, reading.records)
    return Comparison(
        name,
        f"changelog {changelog}",
        rebuilt.events,
        differences(table.view(rebuilt.state), table.view(table.from_table(live))),
        rebuilt.problems,
        unreadable,
    )


async def read_table(settings: Settings, changelog: str, app_id: str) -> tuple[dict[str, Any], tuple[Problem, ...]]:
    """A Faust table's contents from its changelog (JSON keys, pickled fold records; the latest value per key wins),
    and the records that are not a table row, with their coordinates (their keys then read as absent);
    NoLiveState when there is no such changelog."""
    reading = await read(settings, [changelog])
    if reading.absent:
        raise NoLiveState(
            f"no changelog topic {changelog} on {settings.bootstrap}: no streams worker with app id "
            f"{app_id!r} has kept that table there (`swarmlog streams`; --app-id names another)"
        )
    values, skipped = latest_rows(reading.records)
    problems = [Problem(r.topic, r.partition, r.offset, f"not a table row: {exc}") for r, exc in skipped]
    return values, tuple(problems)


async def diff_component(settings: Settings, name: str, key: str | None, data_dir: Path, app_id: str) -> Comparison:
    """`name` rebuilt against its live state: a region's coordinator snapshot under `data_dir`, else the table of the
    streams worker `app_id`."""
    if name == "coordinator":
        return await diff_coordinator(settings, key or "", data_dir)
    return await diff_table(settings, name, app_id)


def has_live_state(target: Component) -> bool:
    """Whether a live process keeps this component's state where a diff can read it."""
    return target.name == "coordinator" or target.table is not None


async def against_live(
    settings: Settings, targets: Sequence[tuple[Component, str | None]], data_dir: Path, app_id: str
) -> tuple[LiveCheck, ...]:
    """Each target that has a live state diffed against it (coordinators' snapshots under `data_dir`, the tables of
    the streams worker `app_id`); a missing live state is said, not failed."""
    checks = []
    for target, key in targets:
        if not has_live_state(target):
            continue
        key = target.resolve(key, settings.region_names)
        try:
            compared = await diff_component(settings, target.name, key, data_dir, app_id)
        except NoLiveState as absent:
            checks.append(LiveCheck(target.name, key, None, note=str(absent)))
        else:
            checks.append(
                LiveCheck(target.name, key, compared.live, len(compared.differences), len(compared.live_problems))
            )
    return tuple(checks)
