"""Cross-checking on the session's broker: the coordinator shell and scripted agents whose replicas disagree on
purpose; the journal shows the tie-breaker and the agreement (or, for a VOTE task, the ballot and its votes), and
`swarmlog replay timeline` shows them too."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

from typer.testing import CliRunner

from swarmlog.cli import app
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.schemas.records import (
    MissionCompleted,
    TaskAssigned,
    TaskCrossChecked,
    VoteRecorded,
    VoteRequested,
)
from swarmlog.settings import Settings

from .harness import named, task
from .live import crew, eventually, journal, submit

REGION, FIRST_SLOT = "region-0", 47
ANSWERS = {0: "42", 1: "41", 2: " 42\n"}
"""gen's replicas disagree (42, 41); its tie-breaker, replica 2, agrees with replica 0 once normalised."""


def answer(assigned: TaskAssigned) -> str:
    """What a scripted agent answers: gen's replicas by replica, `use` what it was given."""
    return ANSWERS[assigned.replica] if assigned.task_id == "gen" else f"used {assigned.inputs['gen']}"


async def test_replicas_that_disagree_get_a_tie_breaker_and_downstream_gets_the_agreed_output(
    settings: Settings, tmp_path: Path
):
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"check-{uuid.uuid4().hex[:8]}"
    async with (
        crew(settings, REGION, 3, capability, FIRST_SLOT, output=answer),
        CoordinatorService(settings, REGION, data_dir=tmp_path),
    ):
        await submit(
            settings,
            mission_id,
            REGION,
            [task("gen", capability, replicas=2), task("use", capability, depends_on=["gen"])],
        )
        events = await eventually(lambda: _ended(settings, mission_id))
    checks = [(c.task_id, c.outcome, c.replica, c.support, c.tie_breaker) for c in named(events, TaskCrossChecked)]
    assert checks == [("gen", "TIE_BREAK", None, 1, 2), ("gen", "AGREED", 0, 2, None)]
    gens = [a for a in named(events, TaskAssigned) if a.task_id == "gen"]
    assert sorted(a.replica for a in gens) == [0, 1, 2] and len({a.agent_id for a in gens}) == 3
    [use] = [a for a in named(events, TaskAssigned) if a.task_id == "use"]
    assert use.inputs == {"gen": "42"}
    [completed] = named(events, MissionCompleted)
    assert completed.success and completed.outputs == ["used 42"]

    env = {"SWARMLOG_BROKER": settings.broker, "SWARMLOG_BOOTSTRAP": settings.bootstrap or ""}
    shown = await asyncio.to_thread(CliRunner().invoke, app, ["replay", "timeline", mission_id, "--json"], env=env)
    assert shown.exit_code == 0, shown.output
    notes = [step["note"] for step in json.loads(shown.output)["steps"] if step["name"] == "TaskCrossChecked"]
    assert notes == ["split 1/2: tie-breaker replica 2", "agreed 2/3 on replica 0"]


VOTED = {0: "42", 1: "41", 2: "forty-two"}
"""A VOTE task's three replicas all differ; the scripted agents vote for the first candidate, replica 0's."""


async def test_replicas_of_a_vote_task_that_differ_are_settled_by_their_agents_votes(
    settings: Settings, tmp_path: Path
):
    mission_id, capability = f"m-{uuid.uuid4().hex[:8]}", f"vote-{uuid.uuid4().hex[:8]}"

    def voted(assigned: TaskAssigned) -> str:
        return VOTED[assigned.replica] if assigned.task_id == "gen" else f"used {assigned.inputs['gen']}"

    async with (
        crew(settings, REGION, 3, capability, FIRST_SLOT + 3, output=voted),
        CoordinatorService(settings, REGION, data_dir=tmp_path),
    ):
        gen = task("gen", capability, replicas=3) | {"check": "VOTE"}
        await submit(settings, mission_id, REGION, [gen, task("use", capability, depends_on=["gen"])])
        events = await eventually(lambda: _ended(settings, mission_id))
    checks = [(c.rule, c.outcome, c.replica, c.support, c.votes) for c in named(events, TaskCrossChecked)]
    # a quorum (2 of 3) whose leader has more than half decides it; the third vote comes to a closed ballot
    assert checks == [("VOTE", "BALLOT", None, 1, 0), ("VOTE", "AGREED", 0, 2, 2)]
    requests = [r for r in named(events, VoteRequested) if r.ballot_id == f"{mission_id}/gen/ballot"]
    assert sorted(r.voter_agent_id for r in requests) == sorted(f"{capability}-{index}" for index in range(3))
    assert len([v for v in named(events, VoteRecorded) if v.ballot_id == f"{mission_id}/gen/ballot"]) == 2
    [use] = [a for a in named(events, TaskAssigned) if a.task_id == "use"]
    assert use.inputs == {"gen": "42"}
    [completed] = named(events, MissionCompleted)
    assert completed.success and completed.outputs == ["used 42"]


async def _ended(settings: Settings, mission_id: str) -> list | None:
    """The mission's journal events once it completed."""
    events = await journal(settings, REGION, mission_id)
    return events if named(events, MissionCompleted) else None
