"""A coordinator driven the way the shell drives it (decide, fold, journal), with simulated agents' events."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from swarmlog.coordinator import Config, Decision, Receive, State, Tick, decide, evolve, initial
from swarmlog.schemas import records
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentRegistered,
    MissionSubmitted,
    TaskAssigned,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    VoteCast,
    VoteRequested,
)

E = TypeVar("E", bound=Event)

T0 = 1_750_000_000_000


def task(task_id: str, *capabilities: str, depends_on: Sequence[str] = (), replicas: int = 1) -> dict[str, Any]:
    """An Avro TaskSpec record."""
    return {
        "task_id": task_id,
        "prompt": f"do {task_id}",
        "required_capabilities": list(capabilities),
        "depends_on": list(depends_on),
        "replicas": replicas,
        "max_steps": 4,
    }


def named(events: Sequence[Event], kind: type[E]) -> list[E]:
    """The events of one class."""
    return [event for event in events if isinstance(event, kind)]


def make(kind: type[E], **fields: Any) -> E:
    """An event of `kind` from plain values, with a test envelope unless `fields` give one."""
    envelope = {
        "event_id": "test-event",
        "occurred_at": T0,
        "correlation_id": fields.get("mission_id"),
        "causation_id": None,
        "producer": "test",
    }
    event = records.from_fields(kind.name, envelope | fields)
    assert isinstance(event, kind)
    return event


def attempt_of(assigned: TaskAssigned) -> dict[str, Any]:
    """The fields naming an assignment's attempt, as the agent's reports about it carry them."""
    return {
        "mission_id": assigned.mission_id,
        "task_id": assigned.task_id,
        "replica": assigned.replica,
        "attempt": assigned.attempt,
        "agent_id": assigned.agent_id,
    }


class Swarm:
    """One region's coordinator and its journal; `send` feeds an input event, `tick` lets time pass."""

    def __init__(self, region: str = "eu", regions: tuple[str, ...] = ("eu",), **config: Any) -> None:
        self.state: State = initial(Config(region, regions, **config))
        self.start = self.state
        self.journal: list[Event] = []
        self.now_ms = T0
        self._sequence = 0

    def input(self, kind: type[Event], **fields: Any) -> Event:
        """An input event as another process would write it."""
        self._sequence += 1
        return make(kind, event_id=f"in-{self._sequence}", occurred_at=self.now_ms, **fields)

    def send(self, kind: type[Event], **fields: Any) -> list[Event]:
        """Decide on a fresh input event and fold what it emits."""
        return self.apply(Receive(self.input(kind, **fields), self.now_ms))

    def tick(self, elapsed_ms: int = 0, inputs_since_ms: int = 0) -> list[Event]:
        """Let time pass and decide a tick (the inputs read without a gap since `inputs_since_ms`)."""
        self.now_ms += elapsed_ms
        self._sequence += 1
        return self.apply(Tick(self.now_ms, f"tick-{self._sequence}", inputs_since_ms))

    def apply(self, command: Receive | Tick, decider: Callable[[Any, State], object] = decide) -> list[Event]:
        """Decide a command with `decider` (it must not be rejected), fold its events and append them to the journal;
        the state the decision carries, if any, must be that fold."""
        decision = decider(command, self.state)
        assert isinstance(decision, Decision), decision
        for event in decision.events:
            self.state = evolve(self.state, event)
        assert decision.state is None or decision.state == self.state, "a decision's state is the fold of its events"
        self.journal.extend(decision.events)
        return list(decision.events)

    def register(self, agent_id: str, *capabilities: str, region: str | None = None, capacity: int = 1) -> list[Event]:
        """An agent comes up with these capabilities, running up to `capacity` tasks (in this region unless told)."""
        return self.send(
            AgentRegistered,
            agent_id=agent_id,
            capabilities=list(capabilities),
            model="smollm2",
            brain="scripted",
            node="node-0",
            gpu=None,
            region=region or self.state.config.region,
            slot=len(self.state.agents),
            capacity=capacity,
        )

    def submit(self, mission_id: str, tasks: Sequence[dict[str, Any]] = (), **fields: Any) -> list[Event]:
        """A client submits a mission."""
        return self.send(
            MissionSubmitted,
            mission_id=mission_id,
            title=mission_id,
            tasks=list(tasks),
            submitted_by="test",
            **fields,
        )

    def running(self) -> list[TaskAssigned]:
        """The TaskAssigned of every attempt still running, oldest first."""
        live = {key for agent in self.state.agents.values() for key in agent.tasks}
        latest = {}
        for event in named(self.journal, TaskAssigned):
            latest[event.mission_id, event.task_id, event.replica] = event
        return [
            event
            for key, event in latest.items()
            if key in live and self.state.missions[key[0]].replica(key[1], key[2]).attempt == event.attempt
        ]

    def started(self, assigned: TaskAssigned) -> list[Event]:
        """The agent of an assignment says it started it."""
        return self.send(TaskStarted, **attempt_of(assigned), ground_truth_version=None)

    def complete(self, assigned: TaskAssigned, output: str, tokens: int = 10) -> list[Event]:
        """The agent of an assignment answers it."""
        return self.send(
            TaskCompleted,
            **attempt_of(assigned),
            output=output,
            confidence=1.0,
            steps=1,
            prompt_tokens=tokens // 2,
            completion_tokens=tokens - tokens // 2,
            latency_ms=5,
        )

    def fail(self, assigned: TaskAssigned, failure: str = "MALFORMED_OUTPUT", tokens: int = 0) -> list[Event]:
        """The agent of an assignment gives up on it, having spent tokens."""
        return self.send(
            TaskFailed,
            **attempt_of(assigned),
            failure=failure,
            detail="bad json",
            raw_output="{",
            steps=1,
            prompt_tokens=tokens // 2,
            completion_tokens=tokens - tokens // 2,
            latency_ms=5,
        )

    def vote(self, request: VoteRequested, candidate_id: str, confidence: float = 1.0) -> list[Event]:
        """A voter answers its VoteRequested."""
        return self.send(
            VoteCast,
            mission_id=request.mission_id,
            ballot_id=request.ballot_id,
            voter_agent_id=request.voter_agent_id,
            candidate_id=candidate_id,
            confidence=confidence,
            reason=None,
        )

    def replay(self) -> State:
        """The state rebuilt from the journal alone."""
        state = self.start
        for event in self.journal:
            state = evolve(state, event)
        return state
