"""An agent's pure core: the task state it folds from its own events, and what it decides on an inbox command.

The state stays bounded: it holds the tasks in flight, and the attempts closed and ballots voted on in the last
KEEP_MS (+ PRUNE_MS) of its own events' time. Dedupe needs no more, because a command older than STALE_MS is never acted on (its
sender took it back long since), and an attempt or ballot dropped from the state was closed more than KEEP_MS before a
later event of this agent, so its command (written before it was acted on, give or take CLOCK_SKEW_MS between clocks)
is older than STALE_MS by the time it could come again. Redeliveries come sooner: after a crash the inbox is read
again from the checkpoint, which lags the state by the effect in flight, and duplicates follow their original closely.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Protocol, TypedDict, TypeGuard, TypeVar

from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    BudgetExceeded,
    BudgetRestored,
    PeerAnswered,
    PeerQuestion,
    TaskAssigned,
    TaskCancelled,
    TaskCompleted,
    TaskFailed,
    TaskReleased,
    TaskStarted,
    VoteCast,
    VoteRequested,
)
from swarmlog.topics import CONTROL, TASK_EVENTS, VOTES

AttemptKey = tuple[str, str, int, int]  # mission_id, task_id, replica, attempt
E = TypeVar("E", bound=Event)
# Far above the coordinator's start timeout (15 s: a task not started by then is reassigned), its liveness timeout
# and a ballot's window, so no command its sender still waits on is ever stale.
STALE_MS = 10 * 60_000
CLOCK_SKEW_MS = 60_000  # how far the agents' and coordinators' clocks may disagree
KEEP_MS = STALE_MS + CLOCK_SKEW_MS
PRUNE_MS = 60_000  # dropping is done once a minute of event time, so the state holds up to KEEP_MS + PRUNE_MS


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
    max_tokens: int | None = None
    """Tokens each generation may take, as the task's spec gives them; None: the agent's own."""

    @property
    def key(self) -> AttemptKey:
        """Which (task, replica, attempt) this is."""
        return self.mission_id, self.task_id, self.replica, self.attempt

    @classmethod
    def of(cls, assigned: TaskAssigned) -> Order:
        """The order a TaskAssigned event carries."""
        return cls(
            assigned.event_id,
            assigned.mission_id,
            assigned.task_id,
            assigned.replica,
            assigned.attempt,
            assigned.prompt,
            dict(assigned.inputs),
            assigned.max_steps,
            assigned.max_tokens,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Ballot:
    """A vote this agent was asked for: candidate id → output, and what the outputs answer (None from a v1 request)."""

    cause_id: str
    mission_id: str
    ballot_id: str
    candidates: Mapping[str, str]
    question: str | None = None

    @classmethod
    def of(cls, requested: VoteRequested) -> Ballot:
        """The ballot a VoteRequested event carries."""
        return cls(
            requested.event_id,
            requested.mission_id,
            requested.ballot_id,
            {c.candidate_id: c.output for c in requested.candidates},
            requested.question,
        )


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
    def of(cls, asked: PeerQuestion) -> Question:
        """The question a PeerQuestion event carries."""
        return cls(
            asked.event_id,
            asked.question_id,
            asked.from_agent_id,
            asked.reply_slot,
            asked.question,
            asked.mission_id,
            asked.task_id,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class AgentState:
    """What an agent knows of its recent history: tasks started and not closed, attempts closed and ballots voted on
    (each with its time) since `seen_ms - KEEP_MS`, whether throttled; `seen_ms` is its newest task or vote event's
    time. Never mutated once built."""

    agent_id: str
    started: frozenset[AttemptKey] = frozenset()
    closed: Mapping[AttemptKey, int] = dataclasses.field(default_factory=dict)
    ballots: Mapping[str, int] = dataclasses.field(default_factory=dict)
    throttled: bool = False
    seen_ms: int = 0


def initial(agent_id: str) -> AgentState:
    """The state of an agent that has done nothing yet."""
    return AgentState(agent_id)


def subject(event: Event) -> str | None:
    """The agent whose state an event changes; None when it changes no agent's (a host folds each event into its
    subject's state only)."""
    match event:
        case TaskStarted() | TaskCompleted() | TaskFailed() | TaskReleased() | BudgetExceeded() | BudgetRestored():
            return event.agent_id
        case VoteCast():
            return event.voter_agent_id
        case _:
            return None


def evolve(state: AgentState, event: Event) -> AgentState:
    """The state after one event (closed attempts and ballots past KEEP_MS dropped); events about other agents leave
    it unchanged."""
    if subject(event) != state.agent_id:
        return state
    match event:
        case TaskStarted():
            key = task_key(event)  # a duplicate written after the attempt closed does not reopen it
            state = state if key in state.closed else dataclasses.replace(state, started=state.started | {key})
        case TaskCompleted() | TaskFailed() | TaskReleased():
            key = task_key(event)
            state = dataclasses.replace(
                state, started=state.started - {key}, closed={**state.closed, key: event.occurred_at}
            )
        case VoteCast():
            state = dataclasses.replace(state, ballots={**state.ballots, event.ballot_id: event.occurred_at})
        case BudgetExceeded() | BudgetRestored():
            return dataclasses.replace(state, throttled=isinstance(event, BudgetExceeded))
    return _pruned(state, max(state.seen_ms, event.occurred_at))


def _pruned(state: AgentState, seen_ms: int) -> AgentState:
    """The state as of `seen_ms`: once a PRUNE_MS, closed attempts and ballots older than KEEP_MS dropped."""
    if seen_ms // PRUNE_MS == state.seen_ms // PRUNE_MS:
        return dataclasses.replace(state, seen_ms=seen_ms)
    since = seen_ms - KEEP_MS
    return dataclasses.replace(
        state,
        seen_ms=seen_ms,
        closed={key: at for key, at in state.closed.items() if at >= since},
        ballots={ballot: at for ballot, at in state.ballots.items() if at >= since},
    )


PROJECTION: Projection[str, AgentState] = Projection(
    "agent",
    (TASK_EVENTS, VOTES, CONTROL),  # its task events, its votes, its budget events
    initial,
    evolve,
    snapshot_version=2,  # the checkpoint's encoding (actors/shell/store.py); 1: before it was versioned
)
"""An agent's task state, keyed by agent id: what it checkpoints, what its recovery and replay fold."""


@dataclasses.dataclass(frozen=True, slots=True)
class HandleInbox:
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
class InboxDecision:
    """Events to write, then effects for the shell to run after they are written."""

    events: tuple[Event, ...] = ()
    effects: tuple[Work | Vote | Reply, ...] = ()


@dataclasses.dataclass(frozen=True, slots=True)
class InboxRejected:
    """An inbox record the agent cannot act on (dead-letter it); the state is unchanged."""

    reason: str


def addressee(event: Event) -> str | None:
    """The agent an inbox command is for; None for an event that is not an inbox command."""
    match event:
        case TaskAssigned(agent_id=agent) | TaskCancelled(agent_id=agent) | VoteRequested(voter_agent_id=agent):
            return agent
        case PeerQuestion(to_agent_id=agent) | PeerAnswered(to_agent_id=agent):
            return agent
        case _:
            return None


def stale(command: HandleInbox) -> bool:
    """Whether a command was written more than STALE_MS ago: its sender has acted without this agent since."""
    return command.now_ms - command.event.occurred_at > STALE_MS


def declared_dead(event: Event, agent_id: str, registration_id: str) -> TypeGuard[AgentDeclaredDead]:
    """Whether a registry event declares this run of the agent (its registration) dead; an older run's death is not."""
    return (
        isinstance(event, AgentDeclaredDead) and event.agent_id == agent_id and event.registration_id == registration_id
    )


class TaskAttempt(Protocol):
    """An event about one attempt of a task by one agent."""

    @property
    def mission_id(self) -> str: ...
    @property
    def task_id(self) -> str: ...
    @property
    def replica(self) -> int: ...
    @property
    def attempt(self) -> int: ...
    @property
    def agent_id(self) -> str: ...


class TaskFields(TypedDict):
    """The fields naming a task attempt and its agent, as keyword arguments of a task event."""

    mission_id: str
    task_id: str
    replica: int
    attempt: int
    agent_id: str


def task_key(event: TaskAttempt) -> AttemptKey:
    """The (mission, task, replica, attempt) of a task event."""
    return event.mission_id, event.task_id, event.replica, event.attempt


def decide(command: HandleInbox, state: AgentState) -> InboxDecision | InboxRejected:
    """Start a new task, resume an interrupted one, skip a closed one, close a cancelled one, vote once in time.

    Events for another agent sharing the slot are not this agent's business; an event that names no agent, or is
    not a command, is rejected (dead-lettered by the shell)."""
    event = command.event
    agent = addressee(event)
    if agent is None:
        return InboxRejected(f"{event.name} is not an inbox command")
    if agent != state.agent_id:
        return InboxDecision()
    match event:
        case TaskAssigned():
            return _assigned(command, event, state)
        case TaskCancelled():
            if task_key(event) not in state.started:
                return InboxDecision()
            cancelled = emit(
                event.event_id,
                "cancelled",
                TaskFailed,
                command.now_ms,
                state.agent_id,
                **task_fields(event),
                failure="CANCELLED",
                detail=event.reason,
                raw_output=None,
                steps=0,
                prompt_tokens=0,
                completion_tokens=0,
                latency_ms=0,
            )
            return InboxDecision((cancelled,))
        case VoteRequested():
            ballot = Ballot.of(event)
            late = event.deadline_at <= command.now_ms or stale(command)  # e.g. read again from the log start
            return (
                InboxDecision() if late or ballot.ballot_id in state.ballots else InboxDecision(effects=(Vote(ballot),))
            )
        case PeerQuestion():
            return InboxDecision(effects=(Reply(Question.of(event)),))
        case _:
            return InboxDecision()  # a PeerAnswered nobody waits on any more (the wait ended before it came)


def _assigned(command: HandleInbox, assigned: TaskAssigned, state: AgentState) -> InboxDecision:
    """A TaskAssigned: nothing when closed, resume when started, nothing when stale, else TaskStarted then work."""
    order = Order.of(assigned)
    if order.key in state.closed:
        return InboxDecision()
    if order.key in state.started:
        return InboxDecision(effects=(Work(order),))
    if stale(command):
        return InboxDecision()
    started = emit(
        order.cause_id,
        "started",
        TaskStarted,
        command.now_ms,
        state.agent_id,
        **task_fields(assigned),
        ground_truth_version=command.ground_truth_version,
    )
    return InboxDecision((started,), (Work(order),))


def task_fields(event: TaskAttempt) -> TaskFields:
    """The fields naming a task attempt and its agent."""
    return TaskFields(
        mission_id=event.mission_id,
        task_id=event.task_id,
        replica=event.replica,
        attempt=event.attempt,
        agent_id=event.agent_id,
    )


def emit(cause_id: str, suffix: str, event_class: type[E], now_ms: int, agent: str, **fields: Any) -> E:
    """An event an agent writes because of `cause_id`, with the deterministic id f"{cause_id}/{suffix}"."""
    return event_class(
        event_id=f"{cause_id}/{suffix}",
        occurred_at=now_ms,
        correlation_id=fields.get("mission_id"),
        causation_id=cause_id,
        producer=f"agent:{agent}",
        **fields,
    )
