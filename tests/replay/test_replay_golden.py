"""Golden histories replay offline to their stored states; a changed fold or decision breaks them."""

from __future__ import annotations

import dataclasses
import json

import pytest
from replay_scenarios import HISTORIES, REGIONS, SCENARIOS, expected
from typer.testing import CliRunner

from swarmlog.cli import app
from swarmlog.replay import history
from swarmlog.replay.components import COMPONENTS
from swarmlog.replay.timeline import timeline
from swarmlog.schemas.records import TaskCompleted, TaskReassigned

NAMES = sorted(SCENARIOS)


def stored(name: str) -> dict:
    """The expected document kept next to a history."""
    return json.loads((HISTORIES / f"{name}.expected.json").read_text())


@pytest.mark.parametrize("name", NAMES)
def test_a_golden_history_replays_offline_to_its_stored_state(name: str):
    loaded, document = history.load(HISTORIES / f"{name}.hist"), stored(name)
    assert loaded.regions == REGIONS
    assert expected(loaded.records, document["mission"]) == document["views"]


@pytest.mark.parametrize("name", NAMES)
def test_today_s_decisions_still_make_the_stored_history(name: str):
    assert SCENARIOS[name]().records == list(history.load(HISTORIES / f"{name}.hist").records)


def test_a_changed_fold_breaks_a_golden_history(monkeypatch: pytest.MonkeyPatch):
    coordinator = COMPONENTS["coordinator"]
    forgetful = dataclasses.replace(
        coordinator,
        projection=dataclasses.replace(
            coordinator.projection,
            evolve=lambda state, event: (
                state if isinstance(event, TaskReassigned) else coordinator.evolve(state, event)
            ),
        ),
    )
    monkeypatch.setitem(COMPONENTS, "coordinator", forgetful)
    document = stored("agent_death")
    loaded = history.load(HISTORIES / "agent_death.hist")
    assert expected(loaded.records, document["mission"]) != document["views"]


def test_the_three_phase_timeline_goes_through_every_phase_causes_first():
    loaded = history.load(HISTORIES / "three_phase.hist")
    steps, problems = timeline(loaded.records, "m-three")
    assert problems == []
    assert [step.phase for step in steps][-1] == "COMPLETED"
    assert {"WORK", "CONSENSUS", "FINAL"} <= {step.phase for step in steps}
    seen = set()
    for step in steps:
        assert (
            step.causation_id is None
            or step.causation_id in seen
            or not any(other.event_id == step.causation_id for other in steps)
        )
        seen.add(step.event_id)
    completed = [step for step in steps if step.name == TaskCompleted.name]
    assert [step.tokens for step in completed] == [12, 12, 4] and all(step.agent for step in completed)


def test_replay_run_verifies_a_history_and_prints_a_component_offline():
    runner, path = CliRunner(), str(HISTORIES / "deadlock.hist")
    verified = runner.invoke(app, ["replay", "run", path, "--json"])
    assert verified.exit_code == 0, verified.output
    assert json.loads(verified.output)["ok"] is True
    shown = runner.invoke(app, ["replay", "run", path, "--component", "waitgraph", "--json"])
    assert json.loads(shown.output)["state"] == stored("deadlock")["views"]["waitgraph"]["state"]


def test_the_cross_check_timeline_shows_the_tie_breaker_and_the_agreement():
    loaded = history.load(HISTORIES / "cross_check.hist")
    steps, problems = timeline(loaded.records, "m-check")
    assert problems == []
    checks = [(step.task, step.note) for step in steps if step.name == "TaskCrossChecked"]
    assert checks == [("gen", "split 1/2: tie-breaker replica 2"), ("gen", "agreed 2/3 on replica 0")]
    tie_breaker = next(
        step for step in steps if step.name == "TaskAssigned" and step.task == "gen" and step.agent == "a3"
    )
    assert steps.index(tie_breaker) > [step.name for step in steps].index("TaskCrossChecked")
