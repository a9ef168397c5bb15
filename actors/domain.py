"""An agent's pure core: the task state it folds from its own events, and what it decides on an inbox command."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from swarmlog.schemas.events import Event, to_millis

TaskKey = tuple[str, str, int, int]  # mission_id, task_id, replica, attempt
CLOSING = ("TaskCompleted", "TaskFailed", "TaskReleased")


@dataclasses.dataclass(frozen=True, slots=True)
class Order:
    """A task this agent was assigned, as the step loop needs it; `cause_id` is the TaskAssigned event id."""

    cause_id: str
    mission_id: str
    task_id: str
    replica: int
    attempt: int
    prompt: str
    inputs: Mapping[str, str]
    max_steps: int

    @property
    def key(self) -> TaskKey:
        """Which (task, replica, attempt) this is."""
        return self.mission_id, self.task_id, self.replica, self.attempt

    @classmethod
    def of(cls, assigned: Event) -> Order:
        """The order a TaskAssigned event carries."""
        data = assigned.data
        return cls(assigned.event_id, data["mission_id"], data["task_id"], data["replica"], data["attempt"],
                   data["prompt"], dict(data["inputs"]), data["max_steps"])


@dataclasses.dataclass(frozen=True, slots=True)
class Ballot:
    """A vote this agent was asked for: candidate id → output."""

    cause_id: str
    mission_id: str
    ballot_id: str
    candidates: Mapping[str, str]

    @classmethod
    def of(cls, requested: Event) -> Ballot:
        """The ballot a VoteRequested event carries."""
        data = requested.data
        return cls(requested.event_id, data["mission_id"], data["ballot_id"],
                   {c["candidate_id"]: c["output"] for c in data["candidates"]})


@dataclasses.dataclass(frozen=True, slots=True)
class Question:
    """A peer's question to this agent; the answer goes to the asker's inbox slot `reply_slot`."""

    cause_id: str
    question_id: str
    from_agent_id: str
    reply_slot: int
    question: str
    mission_id: str | None
    task_id: str | None

    @classmethod
    def of(cls, asked: Event) -> Question:
        """The question a PeerQuestion event carries."""
        data = asked.data
        return cls(asked.event_id, data["question_id"], data["from_agent_id"], data["reply_slot"], data["question"],
                   data["mission_id"], data["task_id"])


@dataclasses.dataclass(frozen=True, slots=True)
class AgentState:
    """What an agent knows of its own history: tasks started and closed, ballots voted on, whether throttled."""

    agent_id: str
    started: frozenset[TaskKey] = frozenset()
    closed: frozenset[TaskKey] = frozenset()
    ballots: frozenset[str] = frozenset()
    throttled: bool = False


def initial(agent_id: str) -> AgentState:
    """The state of an agent that has done nothing yet."""
    return AgentState(agent_id)


def evolve(state: AgentState, event: Event) -> AgentState:
    """The state after one event; events about other agents leave it unchanged."""
    data = event.data
    if data.get("agent_id", data.get("voter_agent_id")) != state.agent_id:
        return state
    if event.name == "TaskStarted":
        return dataclasses.replace(state, started=state.started | {task_key(data)})
    if event.name in CLOSING:
        return dataclasses.replace(state, closed=state.closed | {task_key(data)})
    if event.name == "VoteCast":
        return dataclasses.replace(state, ballots=state.ballots | {data["ballot_id"]})
    if event.name in ("BudgetExceeded", "BudgetRestored"):
        return dataclasses.replace(state, throttled=event.name == "BudgetExceeded")
    return state


def task_key(data: Mapping[str, Any]) -> TaskKey:
    """The (mission, task, replica, attempt) of a task event."""
    return data["mission_id"], data["task_id"], data["replica"], data["attempt"]


@dataclasses.dataclass(frozen=True, slots=True)
class Receive:
    """Decide on one inbox event at now_ms, holding ground-truth version `ground_truth_version`."""

    event: Event
    now_ms: int
    ground_truth_version: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class Work:
    """Effect: run the step loop of an order."""

    order: Order


@dataclasses.dataclass(frozen=True, slots=True)
class Vote:
    """Effect: have the model choose among a ballot's candidates."""

    ballot: Ballot


@dataclasses.dataclass(frozen=True, slots=True)
class Reply:
    """Effect: have the model answer a peer's question."""

    question: Question


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """Events to write, then effects for the shell to run after they are written."""

    events: tuple[Event, ...] = ()
    effects: tuple[Work | Vote | Reply, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class Rejected:
    """An inbox record the agent cannot act on (dead-letter it); the state is unchanged."""

    reason: str


def addressee(event: Event) -> str | None:
    """The agent an inbox command is for."""
    data = event.data
    return data.get("agent_id", data.get("voter_agent_id", data.get("to_agent_id")))


def decide(command: Receive, state: AgentState) -> Decision | Rejected:
    """Start a new task, resume an interrupted one, skip a closed one, close a cancelled one, vote once in time.

    Events for another agent sharing the slot are not this agent's business; an event that names no agent, or is
    not a command, is rejected (dead-lettered by the shell)."""
    event = command.event
    if addressee(event) is None:
        return Rejected(f"{event.name} is not an inbox command")
    if addressee(event) != state.agent_id:
        return Decision()
    if event.name == "TaskAssigned":
        return _assigned(command, state)
    if event.name == "TaskCancelled":
        key = task_key(event.data)
        if key not in state.started or key in state.closed:
            return Decision()
        return Decision((emit(event.event_id, "cancelled", "TaskFailed", command.now_ms, state.agent_id,
                              **task_fields(event.data), failure="CANCELLED", detail=event.data["reason"], raw_output=None, steps=0,
                              prompt_tokens=0, completion_tokens=0, latency_ms=0),))
    if event.name == "VoteRequested":
        ballot = Ballot.of(event)
        late = to_millis(event.data["deadline_at"]) <= command.now_ms  # e.g. read again from the log start
        return Decision() if late or ballot.ballot_id in state.ballots else Decision(effects=(Vote(ballot),))
    if event.name == "PeerQuestion":
        return Decision(effects=(Reply(Question.of(event)),))
    if event.name == "PeerAnswered":
        return Decision()  # an answer nobody waits on any more (the wait ended before it came)
    return Rejected(f"{event.name} is not an inbox command")


def _assigned(command: Receive, state: AgentState) -> Decision:
    """A TaskAssigned: nothing when closed, resume when started, else TaskStarted then work."""
    order = Order.of(command.event)
    if order.key in state.closed:
        return Decision()
    if order.key in state.started:
        return Decision(effects=(Work(order),))
    started = emit(order.cause_id, "started", "TaskStarted", command.now_ms, state.agent_id,
                   **task_fields(command.event.data), ground_truth_version=command.ground_truth_version)
    return Decision((started,), (Work(order),))


def task_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The fields naming a task attempt and its agent."""
    return {name: data[name] for name in ("mission_id", "task_id", "replica", "attempt", "agent_id")}


def emit(cause_id: str, suffix: str, name: str, now_ms: int, agent: str, **fields: Any) -> Event:
    """An event an agent writes because of `cause_id`, with the deterministic id f"{cause_id}/{suffix}"."""
    return Event(name, {
        "event_id": f"{cause_id}/{suffix}",
        "occurred_at": now_ms,
        "correlation_id": fields.get("mission_id"),
        "causation_id": cause_id,
        "producer": f"agent:{agent}",
        **fields,
    })
