"""`swarmlog demo`: the whole swarm on the embedded default, running one three-phase mission end to end."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from swarmlog.actors.brains import BRAINS
from swarmlog.actors.brains.llamacpp import THREADS_VARIABLE
from swarmlog.artifacts import ArtifactStore, open_store, shown
from swarmlog.client import MissionClient, MissionTimeout, outcome
from swarmlog.commands.common import EXIT_FAILED, err, one_line_errors, out, print_json
from swarmlog.coordinator.progress import Terminal, cross_check
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.connection import environment, plaintext
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    ConsensusReached,
    ConsensusTimedOut,
    MissionCompleted,
    PhaseStarted,
    TaskAssigned,
    TaskCrossChecked,
    TaskQueued,
    TaskReassigned,
    TaskResultRecorded,
    VoteRecorded,
    VoteRequested,
)
from swarmlog.services import open_services, process
from swarmlog.services.supervisor import ChildDied, unless_a_child_dies
from swarmlog.settings import Settings

# Four agents, as the seed's FAQ advises to start with; every stage has at least two capable agents.
AGENTS = (
    ("agent-0", "coding,decision_making"),
    ("agent-1", "coding,review"),
    ("agent-2", "testing,review"),
    ("agent-3", "testing,coding,decision_making"),
)
MISSION: dict[str, Any] = {
    "title": "Write, review and test a slugify() helper",
    "tasks": [
        {
            "task_id": "generate",
            "prompt": "Write a Python function slugify(text) that lowercases text and joins words with dashes.",
            "required_capabilities": ["coding"],
        },
        {
            "task_id": "review",
            "prompt": "Review the code you are given and list one concrete improvement.",
            "required_capabilities": ["review"],
            "depends_on": ["generate"],
        },
        {
            "task_id": "test",
            "prompt": "Write one pytest test for the code and review you are given.",
            "required_capabilities": ["testing"],
            "depends_on": ["review"],
            "replicas": 2,
        },
    ],
    "consensus": {"strategy": "MAJORITY", "window_ms": 30_000, "quorum": 0.5},
    "final_action": {
        "prompt": "Decide whether to ship the tested function; answer ship or hold with a reason.",
        "required_capabilities": ["decision_making"],
    },
    "deadline_ms": 600_000,
}


@one_line_errors
def demo(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print MissionCompleted's fields as one JSON object.")
    ] = False,
    timeout_s: Annotated[float, typer.Option(help="Give up on the mission after this many seconds.")] = 600.0,
    brain: Annotated[str, typer.Option(help=f"The agents' model adapter: {', '.join(BRAINS)}.")] = "llamacpp",
    model: Annotated[
        str | None, typer.Option(help="The agents' GGUF path, model id or scripted-brain JSON file.")
    ] = None,
) -> None:
    """Start Tansu, Redis, the stream processors, a coordinator and 4 llama.cpp agents; run one mission; print it.

    Every process is supervised: if one exits before the mission ends, the demo names it, says how it died, shows
    the end of its log, stops the others and exits 1.
    """
    settings = plaintext(
        dataclasses.replace(Settings.from_env(broker="tansu"), bootstrap=None, redis_url=None, regions=1)
    )
    work = Path(tempfile.mkdtemp(prefix="swarmlog-demo-"))
    with open_services(settings) as services:
        settings = settings.with_services(bootstrap=services.broker.bootstrap, redis_url=services.redis.url)
        _progress(f"Tansu on {services.broker.bootstrap}, Redis on {services.redis.url}")
        asyncio.run(ensure_topics(settings))
        with swarm(settings, work, brain, model) as children:
            try:
                result = asyncio.run(
                    unless_a_child_dies(_run_mission(settings, timeout_s), [*services.children, *children])
                )
            except ChildDied as died:
                _progress(f"error: {died}")
                _progress(f"stopping the other processes; every log is kept in {work}")
                raise typer.Exit(EXIT_FAILED) from None
    if as_json:
        print_json(outcome(result) | {"mission": result.name})
    else:
        _print_result(result, open_store(settings))
    if not (isinstance(result, MissionCompleted) and result.success):
        _progress(f"the mission did not succeed; the processes' logs are kept in {work}")
        raise typer.Exit(EXIT_FAILED)
    shutil.rmtree(work, ignore_errors=True)


@contextlib.contextmanager
def swarm(
    settings: Settings, work: Path, brain: str, model: str | None, agents: Sequence[tuple[str, str]] = AGENTS
) -> Iterator[list[process.Child]]:
    """The stream processors, region-0's coordinator and the agents (id, capabilities) as child processes logging
    into `work`, all stopped together on exit."""
    # The agents share this machine's cores: one llama.cpp thread each per core they get (see llamacpp.THREADS_VARIABLE).
    threads = os.environ.get(THREADS_VARIABLE) or str(max(1, (os.cpu_count() or 1) // len(agents)))
    env = os.environ | {
        "SWARMLOG_BROKER": settings.broker,
        "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
        "SWARMLOG_REDIS_URL": settings.redis_url or "",
        "SWARMLOG_REGIONS": str(settings.regions),
        **environment(settings),  # secrets as files, and no inherited Kafka security for the demo's own broker
        THREADS_VARIABLE: threads,
    }
    brain_flags = ["--brain", brain, *(["--model", model] if model else [])]
    commands = [
        ("streams", ["streams", "--data-dir", str(work / "streams")]),
        ("coordinator", ["coordinator", "--region", "region-0", "--data-dir", str(work / "coordinator")]),
    ]
    commands += [
        (
            agent_id,
            [
                "agent",
                agent_id,
                "--capabilities",
                capabilities,
                *brain_flags,
                "--region",
                "region-0",
                "--data-dir",
                str(work / agent_id),
            ],
        )
        for agent_id, capabilities in agents
    ]
    children: list[process.Child] = []
    try:
        for name, argv in commands:
            child = process.spawn(
                [sys.executable, "-m", "swarmlog", *argv], name=name, log=work / f"{name}.log", env=env
            )
            children.append(child)
            _progress(f"started {name} (pid {child.pid}, log: {child.log})")
        yield children
    finally:
        process.stop_all([child.popen for child in children])


async def _run_mission(settings: Settings, timeout_s: float) -> Terminal:
    """Submit the demo mission and narrate its journal until it ends."""
    client = MissionClient(settings, client_name="demo")
    mission_id = await client.submit(MISSION)
    _progress(f"submitted mission {mission_id}: {MISSION['title']}")
    try:
        async with asyncio.timeout(timeout_s):
            async for event in client.follow(mission_id):
                _progress(_narrate(event))
                if isinstance(event, Terminal):
                    return event
    except TimeoutError:
        pass
    raise MissionTimeout(f"mission {mission_id} did not end within {timeout_s:.0f} s")


def _narrate(event: Event) -> str:
    """One line of progress for a journal event."""
    at = datetime.fromtimestamp(event.occurred_at // 1000, UTC).strftime("%H:%M:%S")
    return f"{at} {event.name:<20} {_detail(event)}"


def _detail(event: Event) -> str:
    """What a journal event says about the mission's progress ("" for events the narration passes over)."""
    match event:
        case PhaseStarted():
            return f"phase {event.phase}"
        case TaskAssigned():
            return f"{_task(event)} → {event.agent_id} (score {event.score:.2f}, attempt {event.attempt})"
        case TaskQueued():
            return f"{_task(event)} queued: {event.reason}"
        case TaskResultRecorded():
            return f"{_task(event)} by {event.agent_id}: " + ("done" if event.succeeded else "failed")
        case TaskCrossChecked():
            return f"{event.task_id}: {cross_check(event)}"
        case VoteRequested():
            return f"vote asked of {event.voter_agent_id}"
        case VoteRecorded():
            return f"{event.voter_agent_id} voted {event.candidate_id}"
        case ConsensusReached():
            return f"consensus on {event.candidate_id} in {event.consensus_ms} ms"
        case ConsensusTimedOut():
            return f"consensus window closed with {event.votes}/{event.voters} votes"
        case TaskReassigned():
            return f"{_task(event)} taken from {event.from_agent_id}: {event.reason}"
    return ""


def _task(event: TaskAssigned | TaskQueued | TaskResultRecorded | TaskReassigned) -> str:
    """A task replica as the narration names it: task_id#replica."""
    return f"{event.task_id}#{event.replica}"


def _progress(line: str) -> None:
    """A progress line on stderr, so stdout stays one JSON document with --json."""
    err.print(line, highlight=False, markup=False, soft_wrap=True)


def _print_result(result: Terminal, store: ArtifactStore) -> None:
    """The mission's outcome, readably (an output that is an artifact's reference with where the artifact is)."""
    for name, value in outcome(result).items():
        if name == "outputs":
            for index, output in enumerate(value):
                out.print(f"output {index}: {shown(output, store)}", highlight=False, markup=False, soft_wrap=True)
        elif value is not None:
            out.print(f"{name}: {value}", highlight=False, markup=False)
