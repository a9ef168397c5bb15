"""Verification: every record decodes, every fold run twice over the same records gives identical bytes, and (where
a live state is found: `replay.diff.against_live`) the fold equals it."""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

from swarmlog.replay.components import COMPONENTS, Component, canonical
from swarmlog.replay.diff import LiveCheck
from swarmlog.replay.fold import Problem, Record, Repairs, decoded, replay


@dataclasses.dataclass(frozen=True, slots=True)
class Check:
    """One component folded twice: how many events, whether both runs gave the same bytes, and their digest."""

    component: str
    key: str
    events: int
    deterministic: bool
    digest: str


@dataclasses.dataclass(frozen=True, slots=True)
class Verification:
    """The determinism checks, the undecodable records and the comparisons with live states of one verification."""

    records: int
    checks: tuple[Check, ...]
    problems: tuple[Problem, ...]
    live: tuple[LiveCheck, ...] = ()

    @property
    def ok(self) -> bool:
        """Everything decoded (or is passed over by a recorded journal repair), every fold was deterministic, and
        every live state found equals its rebuild."""
        return (
            all(problem.skipped for problem in self.problems)
            and all(check.deterministic for check in self.checks)
            and all(check.equal for check in self.live)
        )


def default_targets(regions: Sequence[str]) -> list[tuple[Component, str | None]]:
    """Each region's coordinator and every component that needs no key."""
    return [(COMPONENTS["coordinator"], region) for region in regions] + [
        (each, None) for each in COMPONENTS.values() if each.key is None
    ]


def verify(
    records: Sequence[Record], regions: tuple[str, ...], targets: Sequence[tuple[Component, str | None]]
) -> Verification:
    """Decode every record (problems with coordinates) and fold each target twice, comparing canonical bytes."""
    repairs, problems = Repairs(), []
    for record, event in decoded(records):
        if isinstance(event, Problem):
            problems.append(event)
        else:
            repairs.note(record, event)
    checks = []
    for target, key in targets:
        first, second = (replay(target, key, regions, records) for _ in range(2))
        once, twice = (canonical(target.view(run.state, key)).encode() for run in (first, second))
        checks.append(
            Check(
                target.name,
                target.resolve(key, regions),
                first.events,
                once == twice,
                hashlib.sha256(once).hexdigest()[:16],
            )
        )
    return Verification(len(records), tuple(checks), repairs.resolve(problems))
