"""The operator CLI on real brokers: submit an example mission, watch it to its end, see the agents in status."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from coordinator.live import ScriptedAgent, serving  # tests/coordinator (tests/ is on sys.path)
from rich.console import Console
from typer.testing import CliRunner

from swarmlog.cli import app
from swarmlog.client import (
    Consensus,
    FinalAction,
    Mission,
    Task,
    load_mission,
    validate_mission,
)
from swarmlog.commands.watch import render
from swarmlog.coordinator.progress import PROGRESS
from swarmlog.coordinator.shell import CoordinatorService
from swarmlog.schemas.records import TaskSpec
from swarmlog.settings import Settings

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
# The demo's four agents: every pipeline stage has two capable agents, two can make the final decision.
CREW = (
    ("coding", "decision_making"),
    ("coding", "review"),
    ("testing", "review"),
    ("testing", "coding", "decision_making"),
)


@pytest.fixture
def settings(own_settings: Settings) -> Settings:
    """This module runs on a broker of its own (see `own_broker` in conftest.py).

    Known issue, open: after the region-0 coordinators of other test modules (kill -9s, aborted transactions), a
    new region-0 coordinator on the shared broker sometimes took over two minutes to take its first mission.
    The operator CLI is what this module tests, so it runs on a broker of its own until that is understood.
    """
    return own_settings


def env(settings: Settings) -> dict[str, str]:
    """The environment the CLI runs with: the test broker."""
    return {"SWARMLOG_BOOTSTRAP": settings.bootstrap or "", "SWARMLOG_BROKER": settings.broker}


def own_capabilities(mission: dict[str, Any], suffix: str) -> dict[str, Any]:
    """The mission with every capability made unique to this test (other tests' agents stay enlisted in region-0)."""

    def rename(caps: list[str]) -> list[str]:
        return [f"{cap}-{suffix}" for cap in caps]

    tasks = [
        task | {"required_capabilities": rename(task.get("required_capabilities", []))} for task in mission["tasks"]
    ]
    final = mission.get("final_action")
    return (
        mission
        | {"tasks": tasks, "region": "region-0"}
        | ({"final_action": final | {"required_capabilities": rename(final["required_capabilities"])}} if final else {})
    )


@contextlib.asynccontextmanager
async def swarm(settings: Settings, tmp_path: Path, suffix: str) -> AsyncIterator[list[ScriptedAgent]]:
    """Region-0's coordinator and the demo's four scripted agents (capabilities suffixed), serving while the block runs."""
    agents = [
        ScriptedAgent(
            settings,
            f"ops-{suffix}-{index}",
            40 + index,
            "region-0",
            [f"{cap}-{suffix}" for cap in caps] + ["decision_making"],
            latency_s=0.05,
        )
        for index, caps in enumerate(CREW)
    ]
    async with CoordinatorService(settings, "region-0", data_dir=tmp_path), serving(agents):
        yield agents


async def invoke(settings: Settings, *args: str) -> Any:
    """Run the CLI in a thread (it runs its own event loop), with the test broker in its environment."""
    return await asyncio.to_thread(CliRunner().invoke, app, list(args), env=env(settings))


async def test_submit_watch_and_status_of_an_example_mission(settings: Settings, tmp_path: Path):
    suffix = uuid.uuid4().hex[:6]
    mission_file = tmp_path / "pipeline.yaml"
    mission_file.write_text(yaml.safe_dump(own_capabilities(load_mission(EXAMPLES / "pipeline.yaml"), suffix)))
    async with swarm(settings, tmp_path, suffix) as agents:
        submitted = await invoke(settings, "submit", str(mission_file), "--json")
        assert submitted.exit_code == 0, submitted.output
        mission_id = json.loads(submitted.stdout)["mission_id"]

        watched = await invoke(settings, "watch", mission_id, "--json", "--timeout-s", "120")
        assert watched.exit_code == 0, watched.output
        lines = [json.loads(line) for line in watched.stdout.splitlines()]
        progress, result = lines[:-1], lines[-1]
        assert {line["type"] for line in progress} == {"progress"}
        assert {"MissionAccepted", "TaskAssigned", "ConsensusReached", "MissionCompleted"} <= {
            line["event"] for line in progress
        }
        assert _phases(progress) == ["WORK", "CONSENSUS", "FINAL", "COMPLETED"]
        assert result["type"] == "result" and result["success"] is True and result["tasks_completed"] == 6
        assert sum(progress[-1]["done"].values()) == 6 and progress[-1]["tokens"] == result["tokens_used"] > 0

        terminal = await invoke(settings, "watch", mission_id, "--region", "region-0")
        assert terminal.exit_code == 0, terminal.output
        assert "MissionCompleted" in terminal.stdout and "COMPLETED" in terminal.stdout
        assert agents[0].agent_id in terminal.stdout  # the tasks-per-agent table

        listed = await invoke(settings, "agents", "--json")
        assert listed.exit_code == 0, listed.output
        mine = {
            row["agent_id"]: row for row in json.loads(listed.stdout) if row["agent_id"].startswith(f"ops-{suffix}")
        }
        assert set(mine) == {agent.agent_id for agent in agents}
        assert {row["region"] for row in mine.values()} == {"region-0"}
        assert {row["status"] for row in mine.values()} <= {"IDLE", "SILENT"}  # scripted agents send no heartbeats

        status = await invoke(settings, "status", "--json")
        assert status.exit_code == 0, status.output
        document = json.loads(status.stdout)
        assert sum(document["agents"]["region-0"].values()) >= 4
        region = document["regions"]["region-0"]
        assert region["enlisted_agents"] >= 4 and region["queue_depth"] >= 0 and region["journal_events"] > 0
        table = await invoke(settings, "status")
        assert table.exit_code == 0 and "queue depth" in table.stdout


def _phases(progress: list[dict[str, Any]]) -> list[str]:
    """The distinct phases the progress lines went through, in order."""
    phases: list[str] = []
    for line in progress:
        if line["phase"] not in phases and line["phase"] not in ("SUBMITTED", "ACCEPTED"):
            phases.append(line["phase"])
    return phases


def test_a_bad_mission_file_is_one_line_naming_the_field(tmp_path: Path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("title: x\ntasks:\n  - task_id: a\n    prompt: p\n    replicas: two\n")
    result = CliRunner().invoke(app, ["submit", str(bad)], env={"SWARMLOG_BOOTSTRAP": "localhost:1"})
    assert result.exit_code == 2
    assert "replicas" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    cyclic = tmp_path / "cycle.json"
    cyclic.write_text(
        json.dumps(
            {
                "title": "x",
                "tasks": [
                    {"task_id": "a", "prompt": "p", "depends_on": ["b"]},
                    {"task_id": "b", "prompt": "p", "depends_on": ["a"]},
                ],
            }
        )
    )
    result = CliRunner().invoke(app, ["submit", str(cyclic)])
    assert result.exit_code == 2 and "cycle" in result.stderr


def test_an_unreachable_broker_exits_4(tmp_path: Path):
    result = CliRunner().invoke(
        app, ["submit", str(EXAMPLES / "pipeline.yaml")], env={"SWARMLOG_BOOTSTRAP": "localhost:1"}
    )
    assert result.exit_code == 4 and "SWARMLOG_BOOTSTRAP" in result.stderr


@pytest.mark.parametrize("name", ["pipeline.yaml", "unit-tests.yaml"])
def test_the_examples_are_valid_missions(name: str):
    event = validate_mission(load_mission(EXAMPLES / name))
    assert event.tasks and event.final_action


def test_the_builder_gives_what_submit_takes():
    mission = (
        Mission("t", consensus=Consensus(window_s=5), final_action=FinalAction("ship?"), deadline_s=60, token_budget=10)
        .with_task(Task("a", "do a", ("coding",)))
        .with_task(Task("b", "do b", ("review",), depends_on=("a",), replicas=2))
    )
    event = validate_mission(mission.to_dict())
    assert event.tasks[1] == TaskSpec(
        task_id="b", prompt="do b", required_capabilities=["review"], depends_on=["a"], replicas=2, max_steps=4
    )
    assert (event.consensus.window_ms, event.deadline_ms, event.token_budget) == (5000, 60_000, 10)
    assert event.final_action is not None and event.final_action.required_capabilities == ["decision_making"]
    assert not event.pass_replicas and "pass_replicas" not in mission.to_dict()
    assert validate_mission(dataclasses.replace(mission, pass_replicas=True).to_dict()).pass_replicas


def test_the_progress_view_renders_to_a_recorded_console():
    progress = dataclasses.replace(  # no broker: build the progress by hand
        PROGRESS.initial("m1"),
        title="demo",
        phase="CONSENSUS",
        planned=3,
        done={"agent-a": 2},
        failed={"agent-b": 1},
        tokens=42,
        checks={"gen": "agreed 2/3 on replica 0"},
    )
    console = Console(record=True, width=100)
    console.print(render(progress))
    text = console.export_text()
    assert "CONSENSUS" in text and "agent-a" in text and "3/3" in text and "42" in text
    assert "cross-check gen  agreed 2/3 on replica 0" in text


async def test_replay_says_in_one_line_what_it_cannot_do(settings: Settings, tmp_path: Path):
    unknown = await invoke(settings, "replay", "timeline", f"m-{uuid.uuid4().hex[:8]}")
    assert unknown.exit_code == 1 and "no event of mission" in said(unknown)
    tableless = await invoke(settings, "replay", "diff", "mission")
    assert tableless.exit_code == 2 and "mission has no live table to compare with" in said(tableless)
    unwritable = await invoke(settings, "replay", "export", "--out", str(tmp_path / "missing" / "x.hist"))
    assert unwritable.exit_code == 2 and "no folder" in said(unwritable)
    assert isinstance(unwritable.exception, SystemExit), "a usage error, not a traceback"
    not_history = tmp_path / "not.hist"
    not_history.write_bytes(b"plain text")
    unreadable = CliRunner().invoke(app, ["replay", "run", str(not_history)])
    assert unreadable.exit_code == 2 and "not a readable swarmlog-history file" in said(unreadable)


def said(result: Any) -> str:
    """A command's output as one line of words: rich wraps long messages inside a bordered panel."""
    return " ".join(result.output.replace("│", " ").split())
