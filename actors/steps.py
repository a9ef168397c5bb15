"""The step loop of a task and a ballot, pure: from a model's output to the events it leads to and what comes next."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from swarmlog.actors.actions import (
    ANSWER,
    ASK,
    FAIL,
    MAX_CONTENT,
    RECALL,
    REMEMBER,
    VOTE,
    Action,
    action_schema,
    parse_action,
)
from swarmlog.actors.domain import Ballot, E, Order, Question, emit
from swarmlog.actors.groundtruth import GroundTruth
from swarmlog.actors.prompts import task_prompt, vote_prompt
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    ExperienceRecorded,
    FailureKind,
    PeerAnswered,
    PeerQuestion,
    TaskCompleted,
    TaskFailed,
    TaskReleased,
    TaskStepTaken,
    TokensUsed,
    VoteCast,
    WaitEnded,
    WaitOutcome,
    WaitStarted,
)


@dataclasses.dataclass(frozen=True, slots=True)
class Usage:
    """What one generation cost, when it ended, and its name `generation`, which the shell makes unique per generation.

    The name goes into the TokensUsed's event id and generation_id, which budgets dedupe on: a step generated again
    after a restart (a retry) costs tokens again and must count again, while the same generation's events written
    twice stay duplicates. Every other event id still derives from the command and the step alone.
    """

    prompt_tokens: int
    completion_tokens: int
    now_ms: int
    generation: str
    temperature: float | None = None
    """The temperature the generation sampled at; None when no model ran."""
    seed: int | None = None
    """The seed the generation sampled with; None when no model ran."""


MAX_ASKS = 1
"""Questions to peers per task: each costs a peer a generation and blocks this task until answered."""


@dataclasses.dataclass(frozen=True, slots=True)
class PeerWait:
    """A question this run put to a peer and is waiting on; the wait id is also the question id."""

    wait_id: str
    target: str
    question: str


@dataclasses.dataclass(frozen=True, slots=True)
class Run:
    """A task in progress: the steps taken so far, the agent's notes, the tokens spent, a pending question."""

    order: Order
    agent_id: str
    started_ms: int
    step: int = 0
    notes: tuple[str, ...] = ()
    prompt_tokens: int = 0
    completion_tokens: int = 0
    peers: tuple[str, ...] = ()
    asked: int = 0
    waiting: PeerWait | None = None
    max_content: int = MAX_CONTENT
    """The longest content an action of this run may have (characters): what the agent's token budget fits."""

    @property
    def allowed(self) -> tuple[str, ...]:
        """The actions offered at the next step; at the last one the agent must answer or give up."""
        if self.step + 1 >= self.order.max_steps:
            return ANSWER, FAIL
        can_ask = bool(self.peers) and self.asked < MAX_ASKS
        return (ANSWER, REMEMBER, RECALL, ASK, FAIL) if can_ask else (ANSWER, REMEMBER, RECALL, FAIL)

    @property
    def schema(self) -> dict[str, Any]:
        """The JSON schema the next generation is constrained to."""
        return action_schema(self.allowed, targets=self.peers, max_content=self.max_content)

    def prompt(self, memories: Sequence[str] = (), truth: GroundTruth | None = None) -> str:
        """The prompt of the next step."""
        return task_prompt(
            self.order.prompt,
            self.order.inputs,
            memories=memories,
            truth=truth,
            notes=self.notes,
            allowed=self.allowed,
            step=self.step + 1,
            max_steps=self.order.max_steps,
            max_content=self.max_content,
        )


def advance(run: Run, text: str, usage: Usage) -> tuple[tuple[Event, ...], Run | None]:
    """The events of one step and the run that continues, or None when the task closed."""
    step, allowed = run.step + 1, run.allowed
    run = dataclasses.replace(
        run,
        step=step,
        prompt_tokens=run.prompt_tokens + usage.prompt_tokens,
        completion_tokens=run.completion_tokens + usage.completion_tokens,
    )
    used = _tokens(run.order.cause_id, step, run.agent_id, usage, run.order.mission_id, run.order.task_id)
    action = parse_action(text, allowed, targets=run.peers, max_content=run.max_content)
    if not isinstance(action, Action):
        return (
            used,
            _closing(run, usage, TaskFailed, failure="MALFORMED_OUTPUT", detail=action.reason, raw_output=text),
        ), None
    step_taken = _event(
        run,
        f"step-{step}",
        TaskStepTaken,
        usage.now_ms,
        step=step,
        action=action.kind.upper(),
        content=action.content,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        temperature=usage.temperature,
        seed=usage.seed,
    )
    if action.kind == ANSWER:
        # The answer's sampling is recorded with it: a replica's draw is reproducible only with its temperature and seed.
        completed = _closing(
            run,
            usage,
            TaskCompleted,
            output=action.content,
            confidence=action.confidence,
            temperature=usage.temperature,
            seed=usage.seed,
        )
        return (used, step_taken, completed), None
    if action.kind == FAIL:
        return (
            used,
            step_taken,
            _closing(run, usage, TaskFailed, failure="GAVE_UP", detail=action.content, raw_output=None),
        ), None
    run = dataclasses.replace(run, notes=(*run.notes, f"{action.kind}: {action.content}"))
    if action.kind == ASK:
        assert action.target is not None  # parse_action guarantees an ask's target
        wait = PeerWait(f"{run.order.cause_id}/wait-{step}", action.target, action.content)
        started = emit(
            run.order.cause_id,
            f"wait-{step}",
            WaitStarted,
            usage.now_ms,
            run.agent_id,
            wait_id=wait.wait_id,
            waiter_agent_id=run.agent_id,
            waits_for_agent_id=wait.target,
            mission_id=run.order.mission_id,
            task_id=run.order.task_id,
        )
        return (used, step_taken, started), dataclasses.replace(run, asked=run.asked + 1, waiting=wait)
    return (used, step_taken), run


def question(run: Run, reply_slot: int, now_ms: int) -> PeerQuestion:
    """The PeerQuestion of the run's pending wait, to be answered into `reply_slot`."""
    assert run.waiting is not None, "the run is not waiting on a peer"
    wait, order = run.waiting, run.order
    return emit(
        wait.wait_id,
        "question",
        PeerQuestion,
        now_ms,
        run.agent_id,
        question_id=wait.wait_id,
        from_agent_id=run.agent_id,
        to_agent_id=wait.target,
        reply_slot=reply_slot,
        question=wait.question,
        mission_id=order.mission_id,
        task_id=order.task_id,
    )


def wait_ended(
    run: Run, outcome: WaitOutcome, answer: str | None, error: str | None, now_ms: int
) -> tuple[WaitEnded, Run]:
    """WaitEnded of the pending wait, and the run that goes on with the answer (or the lack of one) in its notes."""
    assert run.waiting is not None, "the run is not waiting on a peer"
    wait = run.waiting
    ended = emit(
        wait.wait_id,
        "ended",
        WaitEnded,
        now_ms,
        run.agent_id,
        wait_id=wait.wait_id,
        waiter_agent_id=run.agent_id,
        waits_for_agent_id=wait.target,
        outcome=outcome,
    )
    note = f"{wait.target} answered: {answer}" if answer is not None else f"{wait.target} did not answer: {error}"
    return ended, dataclasses.replace(run, waiting=None, notes=(*run.notes, note))


def reply_schema(max_content: int = MAX_CONTENT) -> dict[str, Any]:
    """The JSON schema of an answer to a peer's question."""
    return action_schema((ANSWER,), max_content=max_content)


def reply_prompt(asked: Question, max_content: int = MAX_CONTENT) -> str:
    """The prompt of an answer to a peer's question."""
    return task_prompt(
        f"Agent {asked.from_agent_id} asks you: {asked.question}",
        {},
        allowed=(ANSWER,),
        step=1,
        max_steps=1,
        max_content=max_content,
    )


def reply(
    asked: Question, agent_id: str, text: str, usage: Usage, max_content: int = MAX_CONTENT
) -> tuple[TokensUsed, PeerAnswered]:
    """TokensUsed, then the PeerAnswered for the asker (an error when the output is not a valid answer)."""
    used = _tokens(asked.cause_id, 1, agent_id, usage, asked.mission_id, asked.task_id)
    action = parse_action(text, (ANSWER,), max_content=max_content)
    answer, error = (action.content, None) if isinstance(action, Action) else (None, f"malformed: {action.reason}")
    answered = emit(
        asked.cause_id,
        "answer",
        PeerAnswered,
        usage.now_ms,
        agent_id,
        question_id=asked.question_id,
        from_agent_id=agent_id,
        to_agent_id=asked.from_agent_id,
        answer=answer,
        error=error,
    )
    return used, answered


def step_taken(events: Sequence[Event]) -> TaskStepTaken | None:
    """The TaskStepTaken among a step's events, if the model's output was a valid action."""
    return next((event for event in events if isinstance(event, TaskStepTaken)), None)


def experience(step: TaskStepTaken, embedding: Sequence[float], node: str, ttl_s: int) -> ExperienceRecorded:
    """ExperienceRecorded of a `remember` step: its content and embedding, for any agent to recall."""
    assert step.causation_id is not None, "a step is caused by its TaskAssigned"
    cause_id, suffix = step.causation_id, f"experience-{step.step}"
    return emit(
        cause_id,
        suffix,
        ExperienceRecorded,
        step.occurred_at,
        step.agent_id,
        mission_id=step.mission_id,
        experience_id=f"{cause_id}/{suffix}",
        agent_id=step.agent_id,
        node=node,
        kind=REMEMBER,
        content=step.content,
        embedding=list(embedding),
        ttl_s=ttl_s,
    )


def released(run: Run, reason: str, now_ms: int) -> TaskReleased:
    """TaskReleased: the agent gives the task back unfinished (it is stopping)."""
    return _event(run, "released", TaskReleased, now_ms, reason=reason)


def broke_off(run: Run, failure: FailureKind, detail: str, now_ms: int) -> TaskFailed:
    """TaskFailed without a model's output: MODEL_ERROR when the brain raised instead of generating, GAVE_UP when an
    input could not be read."""
    return _closing(run, Usage(0, 0, now_ms, ""), TaskFailed, failure=failure, detail=detail, raw_output=None)


def ballot_schema(ballot: Ballot) -> dict[str, Any]:
    """The JSON schema of a vote among the ballot's candidates."""
    return action_schema((VOTE,), tuple(ballot.candidates))


def ballot_prompt(ballot: Ballot) -> str:
    """The prompt of a ballot."""
    return vote_prompt(ballot.candidates, ballot.question)


def vote_events(ballot: Ballot, agent_id: str, text: str, usage: Usage) -> tuple[Event, ...]:
    """TokensUsed, then VoteCast when the output is a valid vote (else the agent abstains)."""
    used = _tokens(ballot.cause_id, 1, agent_id, usage, ballot.mission_id, None)
    action = parse_action(text, (VOTE,), tuple(ballot.candidates))
    if not isinstance(action, Action):
        return (used,)
    vote = emit(
        ballot.cause_id,
        "vote",
        VoteCast,
        usage.now_ms,
        agent_id,
        mission_id=ballot.mission_id,
        ballot_id=ballot.ballot_id,
        voter_agent_id=agent_id,
        candidate_id=action.candidate_id,
        confidence=action.confidence,
        reason=action.content or None,
    )
    return used, vote


def _tokens(
    cause_id: str, step: int, agent_id: str, usage: Usage, mission_id: str | None, task_id: str | None
) -> TokensUsed:
    """TokensUsed of one generation, named by the step and the generation (a retried step is a new generation)."""
    return emit(
        cause_id,
        f"tokens-{step}/{usage.generation}",
        TokensUsed,
        usage.now_ms,
        agent_id,
        agent_id=agent_id,
        generation_id=f"{cause_id}/gen-{step}/{usage.generation}",
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        mission_id=mission_id,
        task_id=task_id,
    )


def _closing(run: Run, usage: Usage, event_class: type[E], **fields: object) -> E:
    """The event that closes a run, with its totals."""
    return _event(
        run,
        "closed",
        event_class,
        usage.now_ms,
        steps=run.step,
        prompt_tokens=run.prompt_tokens,
        completion_tokens=run.completion_tokens,
        latency_ms=usage.now_ms - run.started_ms,
        **fields,
    )


def _event(run: Run, suffix: str, event_class: type[E], now_ms: int, **fields: object) -> E:
    """A task event of this run."""
    order = run.order
    return emit(
        order.cause_id,
        suffix,
        event_class,
        now_ms,
        run.agent_id,
        mission_id=order.mission_id,
        task_id=order.task_id,
        replica=order.replica,
        attempt=order.attempt,
        agent_id=run.agent_id,
        **fields,
    )
