"""`swarmlog replay`: states at any point, mission timelines, rebuild-versus-live diffs, verification, history files."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from swarmlog.artifacts import open_store
from swarmlog.commands.common import EXIT_FAILED, err, one_line_errors, out, print_json
from swarmlog.envelope import now_ms
from swarmlog.errors import ConfigError
from swarmlog.replay import history
from swarmlog.replay.artifacts import Checked, beside, checked, referenced
from swarmlog.replay.components import COMPONENTS, Component, canonical, component
from swarmlog.replay.diff import Comparison, against_live, diff_component
from swarmlog.replay.fold import Problem, Record, replay
from swarmlog.replay.memory import rebuild_memory
from swarmlog.replay.source import Span, read
from swarmlog.replay.timeline import of_mission
from swarmlog.replay.timeline import timeline as mission_timeline
from swarmlog.replay.verify import Verification, default_targets
from swarmlog.replay.verify import verify as verify_records
from swarmlog.settings import Settings, require_reachable
from swarmlog.streams.app.config import worker_setting
from swarmlog.topics import catalog

app = typer.Typer(no_args_is_help=True, help="Rebuild any state from the log with the folds the live processes run.")

Bootstrap = Annotated[str | None, typer.Option(help="Kafka bootstrap servers ($SWARMLOG_BOOTSTRAP).")]
Json = Annotated[bool, typer.Option("--json", help="One JSON document on stdout.")]
Key = Annotated[
    str | None,
    typer.Option(
        help="Region (coordinator), agent id (agent), mission id (mission); "
        "for the others, only the entries of that key."
    ),
]
SnapshotDir = Annotated[Path | None, typer.Option(help="The coordinator's snapshot folder (<cache dir>/coordinator).")]
AppId = Annotated[
    str | None,
    typer.Option(help="The streams worker's Faust app id ($SWARMLOG_STREAMS_APP_ID, else swarmlog-streams)."),
]
MS_THRESHOLD = 10**12
"""--at values from here on are epoch milliseconds, below it offsets."""


def _settings(bootstrap: str | None) -> Settings:
    """The process settings, with a broker that answers."""
    settings = Settings.from_env(bootstrap=bootstrap)
    if not settings.bootstrap:
        raise ConfigError("replay reads a broker: set SWARMLOG_BOOTSTRAP or pass --bootstrap host:port")
    require_reachable(settings.bootstrap)
    return settings


def _usage(problem: Exception) -> typer.BadParameter:
    return typer.BadParameter(str(problem))


def parse_at(value: str | None) -> Span:
    """`--at`: an offset (a whole number below 10^12), epoch milliseconds, or an ISO-8601 time; inclusive."""
    if value is None:
        return Span()
    if value.isdigit():
        return Span(to_offset=int(value)) if int(value) < MS_THRESHOLD else Span(to_ms=int(value))
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise typer.BadParameter(f"--at {value!r} is neither an offset, epoch ms nor an ISO-8601 time") from None
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return Span(to_ms=int(moment.timestamp() * 1000))


def _all_topics(settings: Settings) -> list[str]:
    return [spec.name for spec in catalog(settings)]


def _problems_table(problems: tuple[Problem, ...] | list[Problem]) -> Table:
    """The records that did not decode; those a recorded journal repair passes over say so."""
    unrepaired = sum(1 for problem in problems if not problem.skipped)
    table = Table(
        "topic",
        "partition",
        "offset",
        "reason",
        "skipped",
        title=f"{len(problems)} undecodable records ({unrepaired} not passed over by a repair)",
        title_style="red" if unrepaired else "yellow",
    )
    for problem in problems:
        table.add_row(
            problem.topic, str(problem.partition), str(problem.offset), problem.reason, problem.skipped or "no"
        )
    return table


def _show(document: dict[str, Any], as_json: bool, *tables: Table) -> None:
    """The JSON document, or the rich tables."""
    if as_json:
        print_json(document)
        return
    for table in tables:
        out.print(table)


def _show_state(
    name: str,
    key: str | None,
    regions: tuple[str, ...],
    records: tuple[Record, ...],
    notes: tuple[str, ...],
    as_json: bool,
) -> None:
    """Fold and print one component's state, as JSON entries or a table."""
    chosen = component(name)
    try:
        result = replay(chosen, key, regions, records)
    except ValueError as exc:
        raise _usage(exc) from None
    view = chosen.view(result.state, key)
    table = Table("entry", "value", title=f"{name} {key or ''} after {result.events} events".replace("  ", " "))
    for entry, value in view.items():
        table.add_row(entry, canonical(value))
    document = {
        "component": name,
        "key": key,
        "events": result.events,
        "state": view,
        "notes": list(notes),
        "problems": [dataclasses.asdict(p) for p in result.problems],
    }
    _show(document, as_json, table, *([_problems_table(result.problems)] if result.problems else []))


@app.command()
@one_line_errors
def state(
    name: Annotated[str, typer.Argument(metavar="COMPONENT", help=f"One of: {', '.join(COMPONENTS)}.")],
    at: Annotated[str | None, typer.Option(help="Up to an offset, epoch ms or ISO time (inclusive).")] = None,
    key: Key = None,
    as_json: Json = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Print a component's state folded from the log, now or as of --at."""
    settings = _settings(bootstrap)
    try:
        chosen = component(name)
        partitions = chosen.partitions(chosen.resolve(key, settings.region_names), settings.region_names)
    except ValueError as exc:
        raise _usage(exc) from None
    only = {topic: partitions for topic in chosen.topics} if partitions else None
    reading = asyncio.run(read(settings, chosen.topics, parse_at(at), only))
    _show_state(name, key, settings.region_names, reading.records, reading.notes, as_json)


@app.command()
@one_line_errors
def timeline(
    mission_id: Annotated[str, typer.Argument(metavar="MISSION_ID")],
    as_json: Json = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Every event of a mission across topics, causes before effects, with phase, agent, attempt, latency, tokens, and
    what a task's cross-check decided or how an answer was sampled (temperature, seed)."""
    settings = _settings(bootstrap)
    reading = asyncio.run(read(settings, _all_topics(settings)))
    steps, problems = mission_timeline(reading.records, mission_id)
    start = steps[0].at_ms if steps else 0
    table = Table(
        "+ms",
        "event",
        "topic",
        "phase",
        "agent",
        "task",
        "attempt",
        "latency",
        "tokens",
        "note",
        title=f"mission {mission_id}: {len(steps)} events",
    )
    for step in steps:
        table.add_row(
            str(step.at_ms - start),
            step.name,
            f"{step.topic}[{step.partition}]@{step.offset}",
            step.phase,
            *(
                ("" if value is None else str(value))
                for value in (step.agent, step.task, step.attempt, step.latency_ms, step.tokens, step.note)
            ),
        )
    _show(
        {
            "mission_id": mission_id,
            "steps": [dataclasses.asdict(s) for s in steps],
            "problems": [dataclasses.asdict(p) for p in problems],
        },
        as_json,
        table,
        *([_problems_table(problems)] if problems else []),
    )
    if not steps:
        err.print(f"no event of mission {mission_id} on {settings.bootstrap}", highlight=False)
        raise typer.Exit(EXIT_FAILED)


@app.command()
@one_line_errors
def diff(
    name: Annotated[str, typer.Argument(metavar="COMPONENT", help="coordinator, registry, waitgraph or budgets.")],
    key: Annotated[str | None, typer.Option(help="The coordinator's region (region-0).")] = None,
    data_dir: SnapshotDir = None,
    app_id: AppId = None,
    as_json: Json = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Rebuild a state from the log and compare it with the live one; exit 1 and print each difference."""
    settings = _settings(bootstrap)
    try:
        compared = asyncio.run(diff_component(settings, name, key, *_live_at(settings, data_dir, app_id)))
    except ValueError as exc:
        raise _usage(exc) from None
    _show_comparison(compared, as_json)
    if not compared.equal:
        raise typer.Exit(EXIT_FAILED)


def _show_comparison(compared: Comparison, as_json: bool) -> None:
    """The differences (key, rebuilt value, live value), or a line saying there are none."""
    table = Table(
        "key",
        "rebuilt",
        "live",
        title=f"{compared.component}: {len(compared.differences)} differences "
        f"(rebuilt from {compared.events} events vs {compared.live})",
    )
    for difference in compared.differences:
        table.add_row(difference.key, canonical(difference.rebuilt), canonical(difference.live))
    problems = compared.problems + compared.live_problems
    _show(dataclasses.asdict(compared), as_json, table, *([_problems_table(problems)] if problems else []))


@app.command()
@one_line_errors
def verify(
    name: Annotated[str | None, typer.Argument(metavar="[COMPONENT]", help="Only this component.")] = None,
    key: Key = None,
    data_dir: SnapshotDir = None,
    app_id: AppId = None,
    as_json: Json = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Every record (of every topic, or of the component's) decodes, each fold run twice gives identical bytes, and
    each fold equals its live state where one is found (coordinator snapshots, the streams worker's tables)."""
    settings = _settings(bootstrap)
    try:
        topics = component(name).topics if name else _all_topics(settings)
    except ValueError as exc:
        raise _usage(exc) from None
    regions = settings.region_names
    result = _verification(asyncio.run(read(settings, topics)).records, regions, name, key)
    live = asyncio.run(against_live(settings, _targets(name, key, regions), *_live_at(settings, data_dir, app_id)))
    _report_verification(dataclasses.replace(result, live=live), as_json)


@app.command()
@one_line_errors
def memory(as_json: Json = False, bootstrap: Bootstrap = None) -> None:
    """Write every unexpired experience of swarm.memory.experiences back to the Redis memory bus (after a wipe)."""
    result = asyncio.run(rebuild_memory(_settings(bootstrap), now_ms()))
    table = Table("written", "expired", "undecodable", title="memory bus rebuilt from the log")
    table.add_row(str(result.written), str(result.expired), str(len(result.problems)))
    _show(dataclasses.asdict(result), as_json, table, *([_problems_table(result.problems)] if result.problems else []))


def _live_at(settings: Settings, data_dir: Path | None, app_id: str | None) -> tuple[Path, str]:
    """Where the live states are: the coordinators' snapshot folder and the streams worker's app id, by default
    where those processes keep them."""
    return data_dir or settings.cache_dir / "coordinator", app_id or worker_setting("app_id")


def _targets(name: str | None, key: str | None, regions: tuple[str, ...]) -> list[tuple[Component, str | None]]:
    """What a verification folds: the named component, or each region's coordinator and the keyless ones."""
    return [(component(name), key)] if name else default_targets(regions)


def _verification(
    records: Sequence[Record], regions: tuple[str, ...], name: str | None, key: str | None
) -> Verification:
    """Decode and fold twice; a bad component or key is a usage error."""
    try:
        return verify_records(records, regions, _targets(name, key, regions))
    except ValueError as exc:
        raise _usage(exc) from None


def _report_verification(result: Verification, as_json: bool) -> None:
    """Print a verification; exit 1 when it fails."""
    table = Table(
        "component",
        "key",
        "events",
        "deterministic",
        "digest",
        title=f"{result.records} records, {len(result.problems)} undecodable",
    )
    for check in result.checks:
        table.add_row(
            check.component,
            check.key,
            str(check.events),
            "yes" if check.deterministic else "[red]NO[/red]",
            check.digest,
        )
    live = Table("component", "key", "compared with", "differences", "unreadable rows", title="fold against live state")
    for against in result.live:
        live.add_row(
            against.component,
            against.key,
            against.live or f"nothing: {against.note}",
            str(against.differences),
            str(against.unreadable),
        )
    _show(
        {**dataclasses.asdict(result), "ok": result.ok},
        as_json,
        table,
        *([live] if result.live else []),
        *([_problems_table(result.problems)] if result.problems else []),
    )
    if not result.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command()
@one_line_errors
def export(
    out_file: Annotated[Path, typer.Option("--out", help="The history file to write (gzip'd JSON lines).")],
    mission: Annotated[
        str | None, typer.Option(help="Only this mission's events (and the journal's agent facts).")
    ] = None,
    since: Annotated[str | None, typer.Option(help="From this epoch ms or ISO time.")] = None,
    until: Annotated[str | None, typer.Option(help="Up to this epoch ms or ISO time (inclusive).")] = None,
    as_json: Json = False,
    bootstrap: Bootstrap = None,
) -> None:
    """Write a history (all topics, a mission, or a time range) to a file that `replay run` replays offline, and the
    artifacts its events reference into `<file>.artifacts/` beside it."""
    settings = _settings(bootstrap)
    if not out_file.parent.is_dir():
        raise typer.BadParameter(f"cannot write {out_file}: no folder {out_file.parent}", param_hint="--out")
    span = Span(from_ms=parse_at(since).to_ms if since else None, to_ms=parse_at(until).to_ms if until else None)
    reading = asyncio.run(read(settings, _all_topics(settings), span))
    records, problems = of_mission(reading.records, mission) if mission else (list(reading.records), [])
    selection = {"mission": mission, "since_ms": span.from_ms, "until_ms": span.to_ms}
    try:
        count = history.export(out_file, records, settings.region_names, selection)
        artifacts = checked(referenced(records), open_store(settings), copy_to=beside(out_file))
    except OSError as exc:
        raise typer.BadParameter(f"cannot write {out_file}: {exc.strerror or exc}", param_hint="--out") from None
    table = Table("file", "records", "artifacts", "notes", title="exported")
    table.add_row(str(out_file), str(count), str(len(artifacts)), "; ".join(reading.notes))
    unreadable = [artifact for artifact in artifacts if artifact.problem]
    _show(
        {
            "file": str(out_file),
            "records": count,
            "artifacts": [dataclasses.asdict(artifact) for artifact in artifacts],
            "notes": list(reading.notes),
            "problems": [dataclasses.asdict(p) for p in problems],
        },
        as_json,
        table,
        *([_problems_table(problems)] if problems else []),
        *([_artifacts_table(unreadable, "artifacts not exported")] if unreadable else []),
    )


@app.command()
@one_line_errors
def artifacts(
    file: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False)], as_json: Json = False
) -> None:
    """The artifacts a history file's events reference, read back from `<FILE>.artifacts/` (exit 1 if one cannot
    be): each one's reference, size and file."""
    try:
        loaded = history.load(file)
    except ValueError as exc:
        raise _usage(exc) from None
    store = beside(file)
    found = checked(referenced(loaded.records), store)
    _show(
        {"directory": str(store.root), "artifacts": [dataclasses.asdict(artifact) for artifact in found]},
        as_json,
        _artifacts_table(found, f"artifacts in {store.root}"),
    )
    if any(artifact.problem for artifact in found):
        raise typer.Exit(EXIT_FAILED)


def _artifacts_table(found: Sequence[Checked], title: str) -> Table:
    """Referenced artifacts: reference, size, and readable or why not."""
    table = Table("reference", "bytes", "state", title=title)
    for artifact in found:
        table.add_row(artifact.ref, str(artifact.size), artifact.problem or "readable")
    return table


@app.command()
@one_line_errors
def run(
    file: Annotated[Path, typer.Argument(metavar="FILE", exists=True, dir_okay=False)],
    name: Annotated[str | None, typer.Option("--component", help="Print this component's state instead.")] = None,
    key: Key = None,
    as_json: Json = False,
) -> None:
    """Replay a history file offline (no broker): verify it, or print one component's state."""
    try:
        loaded = history.load(file, component(name).topics if name else None)
    except ValueError as exc:
        raise _usage(exc) from None
    if name:
        _show_state(name, key, loaded.regions, loaded.records, (), as_json)
    else:
        _report_verification(_verification(loaded.records, loaded.regions, None, None), as_json)
