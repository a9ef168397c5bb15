"""A coordinator driven the way the shell drives it (decide, fold, journal), with simulated agents' events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from swarmlog.coordinator import Config, Decision, Receive, State, Tick, decide, evolve, initial
from swarmlog.coordinator.draft import from_millis
from swarmlog.schemas.events import Event

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


def named(events: Sequence[Event], name: str) -> list[Event]:
    """The events of one kind."""
    return [event for event in events if event.name == name]


class Swarm:
    """One region's coordinator and its journal; `send` feeds an input event, `tick` lets time pass."""

    def __init__(self, region: str = "eu", regions: tuple[str, ...] = ("eu",)) -> None:
        self.state: State = initial(Config(region, regions))
        self.start = self.state
        self.journal: list[Event] = []
        self.now_ms = T0
        self._sequence = 0

    def input(self, name: str, **fields: Any) -> Event:
        """An input event as another process would write it."""
        self._sequence += 1
        return Event(
            name,
            {
                "event_id": f"in-{self._sequence}",
                "occurred_at": from_millis(self.now_ms),
                "correlation_id": fields.get("mission_id"),
                "causation_id": None,
                "producer": "test",
                **fields,
            },
        )

    def send(self, name: str, **fields: Any) -> list[Event]:
        """Decide on a fresh input event and fold what it emits."""
        return self.apply(Receive(self.input(name, **fields), self.now_ms))

    def tick(self, elapsed_ms: int = 0, inputs_since_ms: int = 0) -> list[Event]:
        """Let time pass and decide a tick (the inputs read without a gap since `inputs_since_ms`)."""
        self.now_ms += elapsed_ms
        self._sequence += 1
        return self.apply(Tick(self.now_ms, f"tick-{self._sequence}", inputs_since_ms))

    def apply(self, command: Receive | Tick) -> list[Event]:
        """Decide a command (it must not be rejected), fold its events and append them to the journal."""
        decision = decide(command, self.state)
        assert isinstance(decision, Decision), decision
        for event in decision.events:
            self.state = evolve(self.state, event)
        self.journal.extend(decision.events)
        return list(decision.events)

    def register(self, agent_id: str, *capabilities: str, region: str | None = None) -> list[Event]:
        """An agent comes up with these capabilities (in this region unless told)."""
        return self.send(
            "AgentRegistered",
            agent_id=agent_id,
            capabilities=list(capabilities),
            model="smollm2",
            brain="scripted",
            node="node-0",
            gpu=None,
            region=region or self.state.config.region,
            slot=len(self.state.agents),
        )

    def submit(self, mission_id: str, tasks: Sequence[dict[str, Any]] = (), **fields: Any) -> list[Event]:
        """A client submits a mission."""
        return self.send(
            "MissionSubmitted",
            mission_id=mission_id,
            title=mission_id,
            tasks=list(tasks),
            submitted_by="test",
            **fields,
        )

    def running(self) -> list[Event]:
        """The TaskAssigned of every attempt still running, oldest first."""
        live = {agent.task for agent in self.state.agents.values() if agent.task}
        latest = {}
        for event in named(self.journal, "TaskAssigned"):
            key = (event.data["mission_id"], event.data["task_id"], event.data["replica"])
            latest[key] = event
        return [
            event
            for key, event in latest.items()
            if key in live and self.state.missions[key[0]].replica(key[1], key[2]).attempt == event.data["attempt"]
        ]

    def started(self, assigned: Event) -> list[Event]:
        """The agent of an assignment says it started it."""
        return self.send(
            "TaskStarted",
            **{key: assigned.data[key] for key in ("mission_id", "task_id", "replica", "attempt", "agent_id")},
            ground_truth_version=None,
        )

    def complete(self, assigned: Event, output: str, tokens: int = 10) -> list[Event]:
        """The agent of an assignment answers it."""
        data = assigned.data
        return self.send(
            "TaskCompleted",
            mission_id=data["mission_id"],
            task_id=data["task_id"],
            replica=data["replica"],
            attempt=data["attempt"],
            agent_id=data["agent_id"],
            output=output,
            confidence=1.0,
            steps=1,
            prompt_tokens=tokens // 2,
            completion_tokens=tokens - tokens // 2,
            latency_ms=5,
        )

    def fail(self, assigned: Event, failure: str = "MALFORMED_OUTPUT", tokens: int = 0) -> list[Event]:
        """The agent of an assignment gives up on it, having spent tokens."""
        data = assigned.data
        return self.send(
            "TaskFailed",
            mission_id=data["mission_id"],
            task_id=data["task_id"],
            replica=data["replica"],
            attempt=data["attempt"],
            agent_id=data["agent_id"],
            failure=failure,
            detail="bad json",
            raw_output="{",
            steps=1,
            prompt_tokens=tokens // 2,
            completion_tokens=tokens - tokens // 2,
            latency_ms=5,
        )

    def vote(self, request: Event, candidate_id: str, confidence: float = 1.0) -> list[Event]:
        """A voter answers its VoteRequested."""
        data = request.data
        return self.send(
            "VoteCast",
            mission_id=data["mission_id"],
            ballot_id=data["ballot_id"],
            voter_agent_id=data["voter_agent_id"],
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
