"""The coordinator's state for one region: agents, missions and the queue, as immutable records."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Set

from swarmlog.coordinator.idle import IdleAgents
from swarmlog.streams.persistent import PMap, PSet

PLAN_TASK = "@plan"
FINAL_TASK = "@final"
DECISION_MAKING = "decision_making"
MAX_ATTEMPTS = 3
"""Failed attempts a replica gets before it counts as failed for good."""
START_TIMEOUT_MS = 15_000
"""How long an assigned attempt may go without its agent's TaskStarted before it is taken back: 3x the streams
worker's default heartbeat timeout (5 s), so an agent that is alive but never reads its inbox loses the task. It is
the first attempt's; a replica's later attempts wait longer (START_BACKOFF_MAX)."""
START_BACKOFF_MAX = 8
"""The most a replica's start timeout grows: it doubles with each attempt taken back unstarted from an alive agent
(15, 30, 60, then 120 s by default), so a swarm too loaded to start tasks within the start timeout stops trading them
between equally busy agents; 8x the default stays well below the agents' 10-minute limit on a stale assignment."""
RETAIN_ENDED_MS = 60_000
"""How long an ended mission stays in the live state (status, `replay state coordinator`) before it is retired."""
RETAIN_SLOT_MS = 24 * 3_600_000
"""How long a delisted agent that did not say goodbye (declared dead) keeps its allocated inbox slot before it is
released: long enough that an agent wrongly declared dead (a partition, a long pause) has long stopped or come back."""
RETAIN_GOODBYE_SLOT_MS = 600_000
"""How long an agent that deregistered keeps its allocated slot: it stopped reading, but an agent deregisters on every
graceful stop, so a restart or a rescheduled pod within this time gets its slot (and checkpoint) back."""
MAX_ROUTED_BYTES = 500_000
"""The default of Config.max_routed_bytes: half of the default SWARMLOG_MAX_MESSAGE_BYTES (the shell sets half of
the one in force), leaving the other half to the rest of a decision (a mission's acceptance)."""
DEREGISTERED = "deregistered: "
"""How the reason of an AgentDelisted for an agent that said goodbye begins."""

# Replica statuses.
PENDING = "PENDING"
QUEUED = "QUEUED"
RUNNING = "RUNNING"
DONE = "DONE"
FAILED = "FAILED"
CANCELLED = "CANCELLED"

# Mission phases beyond the schema's MissionPhase (PLANNING, WORK, CONSENSUS, FINAL).
ACCEPTED = "ACCEPTED"
COMPLETED = "COMPLETED"
MISSION_FAILED = "FAILED"
ENDED = frozenset({COMPLETED, MISSION_FAILED})

ReplicaKey = tuple[str, str, int]
"""(mission_id, task_id, replica): one replica of one task, the unit that is assigned and queued."""


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """Which region this coordinator decides for, every region that exists (for placement), and its timeouts."""

    region: str = "default"
    regions: tuple[str, ...] = ("default",)
    start_timeout_ms: int = START_TIMEOUT_MS
    retain_ended_ms: int = RETAIN_ENDED_MS
    retain_slot_ms: int = RETAIN_SLOT_MS
    retain_goodbye_slot_ms: int = RETAIN_GOODBYE_SLOT_MS
    inbox_partitions: int = 64
    """The inbox partitions slots are allocated from (the topic's count when the coordinator started)."""
    max_routed_bytes: int = MAX_ROUTED_BYTES
    """About how many bytes of assignments and queue entries one decision emits before it leaves the ready replicas
    still unrouted to the next decisions (ticks): a decision is written whole in one journal record batch. Above 0 it
    routes one at the least; 0 routes none (`decide_unrouted`)."""


@dataclasses.dataclass(frozen=True, slots=True)
class EnlistedAgent:
    """An enlisted agent as routing sees it."""

    agent_id: str
    region: str
    slot: int
    capabilities: frozenset[str]
    model: str = ""
    alive: bool = True
    throttled: bool = False
    tasks: frozenset[ReplicaKey] = frozenset()
    """The task attempts it holds: at most `capacity`, never two replicas of one task."""
    load: int = 0
    capacity: int = 1
    """How many task attempts it runs at once (AgentEnlisted.capacity)."""
    delisted_at: int | None = None
    """When it was delisted (AgentDelisted), while it is: its allocated slot is released a retention later."""
    goodbye: bool = False
    """Whether it was delisted because it deregistered (its slot is kept RETAIN_GOODBYE_SLOT_MS, else RETAIN_SLOT_MS)."""
    released: bool = False
    """Whether its slot was released (SlotReleased) since it was last enlisted: the slot is no longer its own."""

    @property
    def busy(self) -> bool:
        """Whether it holds as many task attempts as it can run at once."""
        return len(self.tasks) >= self.capacity

    @property
    def available(self) -> bool:
        """Whether it can take a task now: alive, running fewer tasks than its capacity, and not throttled."""
        return self.alive and not self.busy and not self.throttled


@dataclasses.dataclass(frozen=True, slots=True)
class TaskSpec:
    """One node of a mission's DAG (WORK), or its planning (PLAN) or final (FINAL) step."""

    task_id: str
    prompt: str
    required_capabilities: frozenset[str] = frozenset()
    depends_on: tuple[str, ...] = ()
    replicas: int = 1
    max_steps: int = 4
    kind: str = "WORK"
    max_tokens: int | None = None
    """Tokens each generation of the task may take; None: the agent's own."""
    check: str = "EQUAL"
    """The rule that cross-checks its replicas (EQUAL, VOTE or JUDGE: see `coordinator.crosscheck`)."""
    judge: str | None = None
    """With check JUDGE: the capability its judge agent needs."""


@dataclasses.dataclass(frozen=True, slots=True)
class Replica:
    """Where one replica of a task stands: its current attempt, agent (since when, and whether it started) and
    result."""

    status: str = PENDING
    attempt: int = 0
    agent_id: str | None = None
    output: str | None = None
    failures: int = 0
    tried: frozenset[str] = frozenset()
    assigned_at: int = 0
    started: bool = False
    done_at: int = 0
    """When its output was recorded (DONE)."""
    slow_starts: int = 0
    """How many of its attempts were taken back before they started from an agent still alive (TaskReassigned): each
    doubles its start timeout, up to START_BACKOFF_MAX times it (see `starts.start_timeout_ms`)."""


# Cross-check rules (TaskSpec.check) and outcomes (TaskCrossChecked).
EQUAL = "EQUAL"
VOTE = "VOTE"
JUDGE = "JUDGE"
AGREED = "AGREED"
TIE_BREAK = "TIE_BREAK"
BALLOT = "BALLOT"
DISPUTED = "DISPUTED"
SETTLING = frozenset({TIE_BREAK, BALLOT})
"""Outcomes after which the task is not yet settled: a tie-breaker replica runs, or its ballot is open."""


@dataclasses.dataclass(frozen=True, slots=True)
class CrossCheck:
    """The latest comparison of a replicated task's outputs: its outcome, the replica chosen, and when."""

    outcome: str
    replica: int | None
    at: int


def workers(replicas: Iterable[Replica]) -> frozenset[str]:
    """Every agent that worked on these replicas (running, done, or failed them): a tie-breaker runs on none of them."""
    found: set[str] = set()
    for replica in replicas:
        found |= replica.tried | ({replica.agent_id} if replica.agent_id else set())
    return frozenset(found)


def cross_checked(spec: TaskSpec) -> bool:
    """Whether the task's replicas are compared before its output counts (a WORK task with more than one)."""
    return spec.kind == "WORK" and spec.replicas > 1


def finished(spec: TaskSpec, statuses: Set[str], check: CrossCheck | None) -> bool:
    """Whether a task is finished: its replicas' outputs compared and settled (when it is cross-checked), else every
    replica ended and one succeeded."""
    if cross_checked(spec):
        return check is not None and check.outcome not in SETTLING
    return statuses <= {DONE, FAILED} and DONE in statuses


FRESH = Replica()
"""A replica never routed."""


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One distinct output on the ballot."""

    candidate_id: str
    agent_id: str
    output: str


@dataclasses.dataclass(frozen=True, slots=True)
class BallotTally:
    """A consensus ballot (the mission's, or a task's cross-check by VOTE or JUDGE) and the votes recorded so far."""

    ballot_id: str
    candidates: tuple[Candidate, ...]
    opened_at: int
    deadline_at: int
    voters: tuple[str, ...] = ()
    votes: Mapping[str, tuple[str, float]] = dataclasses.field(default_factory=dict)


def mission_ballot_id(mission_id: str) -> str:
    """The id of the mission's phase-2 ballot."""
    return f"{mission_id}/ballot"


def task_ballot_id(mission_id: str, task_id: str) -> str:
    """The id of a task's cross-check ballot."""
    return f"{mission_id}/{task_id}/ballot"


def ballot_task(mission_id: str, ballot_id: str) -> str | None:
    """The task whose cross-check ballot this is, or None for the mission's own ballot (or a foreign id)."""
    prefix, suffix = f"{mission_id}/", "/ballot"
    if ballot_id == mission_ballot_id(mission_id) or not (ballot_id.startswith(prefix) and ballot_id.endswith(suffix)):
        return None
    return ballot_id[len(prefix) : -len(suffix)] or None


@dataclasses.dataclass(frozen=True, slots=True)
class ConsensusSpec:
    """How phase 2 decides."""

    strategy: str = "MAJORITY"
    window_ms: int = 30_000
    quorum: float = 0.5


@dataclasses.dataclass(frozen=True, slots=True)
class MissionState:
    """A mission this region runs: its plan, progress, ballot and counters."""

    mission_id: str
    title: str
    submitted_at: int
    deadline_at: int | None
    token_budget: int | None
    consensus: ConsensusSpec
    tasks: Mapping[str, TaskSpec]
    pass_replicas: bool = False
    """Whether inputs carry every replica's output of a replicated task too (see `dispatch.inputs`)."""
    phase: str = ACCEPTED
    replicas: Mapping[tuple[str, int], Replica] = dataclasses.field(default_factory=dict)
    ballot: BallotTally | None = None
    decision: str | None = None
    consensus_ms: int | None = None
    tokens: int = 0
    completed: int = 0
    failed: int = 0
    malformed: int = 0
    agents: frozenset[str] = frozenset()
    handled: Set[str] = PSet()
    """The inputs that caused events of this mission (redeliveries of them are skipped): persistent, so noting one
    costs O(log n), not a copy of them all."""
    ended_at: int | None = None
    pending: Set[str] = PSet()
    """Tasks with a replica waiting to be routed (status PENDING): kept by `evolve`, so deciding scans these, not
    every task of the mission."""
    unfinished: Set[str] = PSet()
    """Tasks not yet finished (see `finished`): kept by `evolve`."""
    failed_tasks: Set[str] = PSet()
    """Tasks whose every replica failed for good: kept by `evolve`."""
    unstarted: Set[str] = PSet()
    """Tasks with a replica running but not started yet (a start may time out): kept by `evolve`, so each tick scans
    these, not every replica of the mission."""
    checks: Mapping[str, CrossCheck] = dataclasses.field(default_factory=dict)
    """The latest cross-check of each replicated task compared so far (TaskCrossChecked)."""
    task_ballots: Mapping[str, BallotTally] = dataclasses.field(default_factory=dict)
    """The ballot of each task cross-checked by VOTE or JUDGE whose outputs differed, by task id."""

    @property
    def active(self) -> bool:
        """Whether it still runs."""
        return self.phase not in ENDED

    def replica(self, task_id: str, index: int) -> Replica:
        """The replica's record (a fresh one when never assigned)."""
        return self.replicas.get((task_id, index), FRESH)

    def finished(self, task_id: str) -> bool:
        """Whether a task is finished (see `finished`)."""
        spec = self.tasks[task_id]
        statuses = {self.replica(task_id, i).status for i in range(spec.replicas)}
        return finished(spec, statuses, self.checks.get(task_id))


@dataclasses.dataclass(frozen=True, slots=True)
class State:
    """Everything the coordinator of one region knows: a fold of its journal."""

    config: Config = Config()
    agents: Mapping[str, EnlistedAgent] = dataclasses.field(default_factory=PMap)
    """Every agent enlisted here, delisted ones too: persistent, so replacing one costs O(log n), not a copy of all."""
    missions: Mapping[str, MissionState] = dataclasses.field(default_factory=dict)
    queue: tuple[ReplicaKey, ...] = ()
    rejected: frozenset[str] = frozenset()
    retired: Set[str] = PSet()
    """Retired missions' ids: a persistent set, so that retiring one costs O(log n), not a copy of them all."""
    broken_waits: frozenset[str] = frozenset()
    slots: Mapping[str, int] = dataclasses.field(default_factory=dict)
    """The inbox slot allocated to each agent of the region (SlotAllocated) until it is released (SlotReleased)."""
    slot_requests: Mapping[str, str] = dataclasses.field(default_factory=dict)
    """The id of the last SlotRequested answered, per agent (a redelivered request is not answered twice)."""
    idle: IdleAgents = dataclasses.field(default_factory=IdleAgents)
    """The agents that can take a task now (`EnlistedAgent.available`), by capability set and load: kept by `evolve`,
    so routing scores each capability set once instead of every enlisted agent."""

    def known(self, mission_id: str) -> bool:
        """Whether the mission was ever submitted here: running, ended, rejected or retired."""
        return mission_id in self.missions or mission_id in self.rejected or mission_id in self.retired


def initial(config: Config) -> State:
    """The empty state of the coordinator of config.region."""
    return State(config=config)


INITIAL = initial(Config())
