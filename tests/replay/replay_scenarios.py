"""Golden histories, made with the pure coordinator harness and the streams' own decisions (no broker).

Every input and decision is recorded on the topic that carries it (journal: region-0's partition 0; other topics:
partition 0), timestamped with its occurred_at. Regenerate, on purpose only, with
`.venv/bin/python tests/replay/replay_scenarios.py`: it rewrites tests/histories/*.hist and their *.expected.json.
"""

from __future__ import annotations

import collections
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the coordinator harness package

from coordinator.harness import Swarm, named, task

from swarmlog.coordinator import Receive
from swarmlog.coordinator.decide import INPUTS
from swarmlog.replay import history
from swarmlog.replay.components import COMPONENTS
from swarmlog.replay.fold import Record, replay
from swarmlog.replay.verify import default_targets
from swarmlog.schemas.codec import decode, encode
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentRegistered,
    DeadlockBroken,
    TaskAssigned,
    TokensUsed,
    VoteRequested,
    WaitEnded,
    WaitStarted,
)
from swarmlog.settings import Settings
from swarmlog.streams import budgets, waitgraph
from swarmlog.topics import JOURNAL, REGISTRY, catalog

HISTORIES = Path(__file__).resolve().parents[1] / "histories"
REGIONS = ("region-0",)
TOPIC_OF = {name: spec.name for spec in reversed(catalog(Settings())) for name in spec.events if spec.name != JOURNAL}


class RecordedSwarm(Swarm):
    """The harness's coordinator, with every input and journal event kept as a log record."""

    def __init__(self) -> None:
        super().__init__(REGIONS[0], REGIONS)
        self.records: list[Record] = []
        self._offsets: collections.Counter[str] = collections.Counter()

    def input(self, kind: type[Event], **fields: Any) -> Event:
        """An input event, recorded on its topic."""
        return self.record(TOPIC_OF[kind.name], super().input(kind, **fields))

    def apply(self, command: Any) -> list[Event]:
        """Decide and fold as the harness does, recording the journal events."""
        events = super().apply(command)
        for event in events:
            self.record(JOURNAL, event)
        return events

    def record(self, topic: str, event: Event) -> Event:
        """Append `event`, encoded, to `topic` at the next offset."""
        self.records.append(Record(topic, 0, self._offsets[topic], event.occurred_at, None, encode(event)))
        self._offsets[topic] += 1
        return event

    def deliver(self, event: Event) -> list[Event]:
        """Record an event another process decided, and let the coordinator decide on it if it takes it."""
        self.record(TOPIC_OF[event.name], event)
        return self.apply(Receive(event, self.now_ms)) if isinstance(event, INPUTS) else []

    def registration(self, agent_id: str) -> str:
        """The event id of the agent's AgentRegistered."""
        return next(
            e.event_id
            for r in self.records
            if r.topic == REGISTRY
            for e in [decode(r.value or b"")]
            if isinstance(e, AgentRegistered) and e.agent_id == agent_id
        )


def three_phase() -> RecordedSwarm:
    """Two tasks answer differently, the voters pick one, the decider ships it."""
    swarm = RecordedSwarm()
    for agent_id in ("a1", "a2", "a3"):
        swarm.register(agent_id, "code")
    swarm.register("boss", "decision_making")
    swarm.submit(
        "m-three",
        [task("gen", "code"), task("alt", "code")],
        final_action={"prompt": "ship it", "required_capabilities": ["decision_making"]},
    )
    for assigned, output in zip(sorted(swarm.running(), key=lambda a: a.task_id), ("v1", "v2"), strict=False):
        swarm.started(assigned)
        swarm.now_ms += 200
        swarm.complete(assigned, output, tokens=12)
    requests = named(swarm.journal, VoteRequested)
    swarm.now_ms += 300
    for request in requests:
        swarm.vote(request, requests[0].candidates[0].candidate_id)
    [final] = swarm.running()
    swarm.started(final)
    swarm.complete(final, "shipped", tokens=4)
    return swarm


def cross_check() -> RecordedSwarm:
    """Two replicas disagree, a tie-breaker on a third agent agrees with one, the next task gets the agreed output."""
    swarm = RecordedSwarm()
    for agent_id in ("a1", "a2", "a3"):
        swarm.register(agent_id, "code")
    swarm.submit("m-check", [task("gen", "code", replicas=2), task("use", "code", depends_on=["gen"])])
    for assigned, output in zip(sorted(swarm.running(), key=lambda a: a.replica), ("42", "41"), strict=True):
        swarm.started(assigned)
        swarm.now_ms += 200
        swarm.complete(assigned, output, tokens=12)
    [tie_breaker] = swarm.running()
    swarm.started(tie_breaker)
    swarm.now_ms += 200
    swarm.complete(tie_breaker, " 42\n", tokens=12)
    [use] = swarm.running()
    swarm.started(use)
    swarm.complete(use, f"used {use.inputs['gen']}", tokens=4)
    return swarm


def judged_check() -> RecordedSwarm:
    """Three replicas of a JUDGE task differ; the judge agent's vote on its ballot chooses, the next task gets it."""
    swarm = RecordedSwarm()
    for agent_id in ("a1", "a2", "a3"):
        swarm.register(agent_id, "code")
    swarm.register("j", "judge")
    judged = task("gen", "code", replicas=3) | {"check": "JUDGE", "judge": "judge"}
    swarm.submit("m-judged", [judged, task("use", "code", depends_on=["gen"])])
    for assigned, output in zip(sorted(swarm.running(), key=lambda a: a.replica), ("41", "42", "41"), strict=True):
        swarm.started(assigned)
        swarm.now_ms += 200
        swarm.complete(assigned, output, tokens=12)
    [request] = named(swarm.journal, VoteRequested)
    swarm.now_ms += 300
    swarm.vote(request, "gen/1")
    [use] = swarm.running()
    swarm.started(use)
    swarm.complete(use, f"used {use.inputs['gen']}", tokens=4)
    return swarm


def agent_death() -> RecordedSwarm:
    """The agent of a task dies; the task is reassigned with the next attempt and the late answer is stale."""
    swarm = RecordedSwarm()
    swarm.register("a", "code")
    swarm.register("b", "code")
    swarm.submit("m-death", [task("t", "code")])
    [first] = swarm.running()
    swarm.started(first)
    swarm.now_ms += 6000
    [second] = named(
        swarm.send(
            AgentDeclaredDead,
            agent_id="a",
            registration_id=swarm.registration("a"),
            last_heartbeat_at=swarm.now_ms - 6000,
            timeout_ms=5000,
            in_flight_task="t",
        ),
        TaskAssigned,
    )
    swarm.complete(first, "zombie answer")
    swarm.started(second)
    swarm.complete(second, "real answer")
    return swarm


def deadlock() -> RecordedSwarm:
    """Two agents wait for each other; the streams detect the cycle, the coordinator aborts the youngest wait."""
    swarm = RecordedSwarm()
    swarm.register("a", "code")
    swarm.register("b", "code")
    swarm.submit("m-lock", [task("x", "code"), task("y", "code")])
    graph = waitgraph.INITIAL
    for wait_id, waiter, waits_for in (("w-1", "a", "b"), ("w-2", "b", "a")):
        swarm.now_ms += 100
        started = swarm.input(
            WaitStarted,
            wait_id=wait_id,
            waiter_agent_id=waiter,
            waits_for_agent_id=waits_for,
            mission_id="m-lock",
            task_id=None,
        )
        graph = waitgraph.evolve(graph, started)
        for detected in waitgraph.decide_deadlocks(graph, swarm.now_ms, started):
            graph = waitgraph.evolve(graph, detected)
            [broken] = named(swarm.deliver(detected), DeadlockBroken)
    swarm.input(WaitEnded, wait_id=broken.wait_id, waiter_agent_id="b", waits_for_agent_id="a", outcome="ABORTED")
    for assigned in swarm.running():
        swarm.complete(assigned, f"{assigned.task_id} done")
    return swarm


def throttle() -> RecordedSwarm:
    """An agent goes over its token budget, its work waits in the queue until the budget is restored."""
    swarm = RecordedSwarm()
    swarm.register("x", "code")
    policy, usage = budgets.BudgetPolicy(default_tokens=100), budgets.INITIAL
    for generation in range(3):
        used = swarm.input(
            TokensUsed,
            agent_id="x",
            generation_id=f"g-{generation}",
            prompt_tokens=30,
            completion_tokens=20,
            mission_id=None,
            task_id=None,
        )
        usage = budgets.evolve(usage, used)
        for exceeded in budgets.decide_budget(usage, used, policy):
            usage = budgets.evolve(usage, exceeded)
            swarm.deliver(exceeded)
    swarm.submit("m-throttle", [task("a", "code")])
    swarm.now_ms += budgets.DEFAULT_WINDOW_MS
    for restored in budgets.decide_budget(usage, swarm.now_ms, policy):
        usage = budgets.evolve(usage, restored)
        swarm.deliver(restored)
    [assigned] = swarm.running()
    swarm.complete(assigned, "done under budget")
    return swarm


SCENARIOS: dict[str, Callable[[], RecordedSwarm]] = {
    "three_phase": three_phase,
    "cross_check": cross_check,
    "judged_check": judged_check,
    "agent_death": agent_death,
    "deadlock": deadlock,
    "throttle": throttle,
}


def expected(records: list[Record] | tuple[Record, ...], mission_id: str) -> dict[str, Any]:
    """What the replay of a history must give: each default component's view and the mission's view."""
    targets = [*default_targets(REGIONS), (COMPONENTS["mission"], mission_id)]
    views = {}
    for target, key in targets:
        result = replay(target, key, REGIONS, records)
        name = "/".join(filter(None, (target.name, target.resolve(key, REGIONS))))
        views[name] = {"events": result.events, "state": target.view(result.state, key)}
    return views


def mission_of(swarm: RecordedSwarm) -> str:
    """The one mission of a scenario."""
    [mission_id] = swarm.state.missions
    return mission_id


def regenerate() -> None:
    """Rewrite every golden history and its expected state."""
    HISTORIES.mkdir(exist_ok=True)
    for name, scenario in SCENARIOS.items():
        swarm = scenario()
        mission_id = mission_of(swarm)
        history.export(
            HISTORIES / f"{name}.hist",
            swarm.records,
            REGIONS,
            {"scenario": name, "mission": mission_id, "made_with": "tests/coordinator/harness.py"},
        )
        (HISTORIES / f"{name}.expected.json").write_text(
            json.dumps({"mission": mission_id, "views": expected(swarm.records, mission_id)}, indent=1, sort_keys=True)
            + "\n"
        )
        print(f"{name}: {len(swarm.records)} records")


if __name__ == "__main__":
    regenerate()
