"""The top level: split a mission larger than a region across the regions, follow its shares, move the share of a
region that stops answering, and complete the mission. Pure: time, ids and the regions' latest announcements come in
the command, and every decision is an event of the top's journal, whose fold is its state.

A mission reaches it as a MissionSubmitted naming the region `top` (`placement.TOP`). Each share runs as a
sub-mission `<mission>/<share>` (`<mission>/<share>/<attempt>` once moved) in one region, submitted to swarm.missions
(`submissions`, derived from the journal); its end, read from the regions' journals, becomes a ShareCompleted. Once
every share completed, the mission's final action (if any) runs as the share `final` over the shares' outputs, and the
top's journal gets the mission's MissionCompleted (or MissionFailed: a share failed, or its deadline passed).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from swarmlog.coordinator import plan, split
from swarmlog.coordinator.announcements import MISSED_INTERVALS, Announcement, Figures
from swarmlog.coordinator.placement import TOP
from swarmlog.coordinator.state import DECISION_MAKING
from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import (
    ConsensusSpec,
    FinalActionSpec,
    FinalSharePlaced,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    MissionSplit,
    MissionSubmitted,
    ShareCompleted,
    ShareMoved,
    SharePlan,
    TaskSpec,
)
from swarmlog.topics import TOP_JOURNAL

PRODUCER = "top"
MOVE_AFTER_MS = 15_000
"""How long a share's region must have been unserved before the share moves (on top of the 3 silent announcement
intervals that make it unserved): a coordinator restarting within it keeps its share."""
FINAL_SHARE = "final"
FINAL_TASK = "final"
E = TypeVar("E", bound=Event)


@dataclasses.dataclass(frozen=True, slots=True)
class Config:
    """The top level's settings."""

    move_after_ms: int = MOVE_AFTER_MS


@dataclasses.dataclass(frozen=True, slots=True)
class Share:
    """A part of a mission run as one sub-mission in one region."""

    share_id: str
    sub_mission_id: str
    region: str
    """Empty while it is not placed (no region was served)."""
    tasks: tuple[TaskSpec, ...]
    placed_at: int
    placed_by: str
    """The journal event that placed it: the cause of its sub-mission's MissionSubmitted."""
    attempt: int = 0
    result: ShareCompleted | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TopMission:
    """A split mission and its shares."""

    mission_id: str
    title: str
    submitted_at: int
    submitted_by: str
    consensus: ConsensusSpec
    final_action: FinalActionSpec | None
    deadline_at: int | None
    token_budget: int | None
    task_count: int
    shares: Mapping[str, Share]
    ended: MissionCompleted | MissionFailed | None = None

    def share(self, share_id: str) -> Share:
        """One of its shares."""
        return self.shares[share_id]


@dataclasses.dataclass(frozen=True, slots=True)
class State:
    """The fold of the top's journal."""

    config: Config = Config()
    missions: Mapping[str, TopMission] = dataclasses.field(default_factory=dict)
    running: Mapping[str, tuple[str, str]] = dataclasses.field(default_factory=dict)
    """(mission, share) by the sub-mission id of each share's current attempt that has not ended."""
    rejected: frozenset[str] = frozenset()

    def known(self, mission_id: str) -> bool:
        """Whether the mission was split or rejected already."""
        return mission_id in self.missions or mission_id in self.rejected


def initial(config: Config) -> State:
    """The state before any journal event."""
    return State(config)


def figures(state: State) -> Figures:
    """What the top level announces about itself: no agents of its own, and the missions it has not ended."""
    return {
        "agents": 0,
        "idle_agents": 0,
        "active_missions": sum(1 for mission in state.missions.values() if mission.ended is None),
    }


def sub_mission_id(mission_id: str, share_id: str, attempt: int) -> str:
    """The id a share's attempt runs under in its region."""
    return f"{mission_id}/{share_id}" + (f"/{attempt}" if attempt else "")


# --- the fold ---


def evolve(state: State, event: Event) -> State:
    """The state after one journal event (events of other kinds change nothing)."""
    match event:
        case MissionSplit():
            return _split(state, event)
        case ShareMoved():
            share = state.missions[event.mission_id].share(event.share_id)
            moved = dataclasses.replace(
                share,
                sub_mission_id=sub_mission_id(event.mission_id, share.share_id, event.attempt),
                region=event.region,
                placed_at=event.occurred_at,
                placed_by=event.event_id,
                attempt=event.attempt,
            )
            running = {key: value for key, value in state.running.items() if key != share.sub_mission_id}
            return _with_share(dataclasses.replace(state, running=running), event.mission_id, moved)
        case ShareCompleted():
            share = state.missions[event.mission_id].share(event.share_id)
            running = {key: value for key, value in state.running.items() if key != share.sub_mission_id}
            done = dataclasses.replace(share, result=event)
            return _with_share(dataclasses.replace(state, running=running), event.mission_id, done)
        case FinalSharePlaced():
            mission = state.missions[event.mission_id]
            final = Share(
                event.share_id,
                sub_mission_id(event.mission_id, event.share_id, 0),
                event.region,
                (TaskSpec(FINAL_TASK, event.prompt, sorted({*event.required_capabilities, DECISION_MAKING})),),
                event.occurred_at,
                event.event_id,
            )
            return _placed(state, mission, [final])
        case MissionCompleted() | MissionFailed() if event.mission_id in state.missions:
            mission = state.missions[event.mission_id]
            ended = {share.sub_mission_id for share in mission.shares.values()}
            return dataclasses.replace(
                state,
                missions={**state.missions, mission.mission_id: dataclasses.replace(mission, ended=event)},
                running={key: value for key, value in state.running.items() if key not in ended},
            )
        case MissionRejected():
            return dataclasses.replace(state, rejected=state.rejected | {event.mission_id})
    return state


def _split(state: State, event: MissionSplit) -> State:
    """A split mission and its shares, the placed ones running."""
    mission = TopMission(
        mission_id=event.mission_id,
        title=event.title,
        submitted_at=event.submitted_at,
        submitted_by=event.submitted_by,
        consensus=event.consensus,
        final_action=event.final_action,
        deadline_at=event.deadline_at,
        token_budget=event.token_budget,
        task_count=len(event.tasks),
        shares={},
    )
    specs = {task.task_id: task for task in event.tasks}
    shares = [
        Share(
            part.share_id,
            sub_mission_id(event.mission_id, part.share_id, 0),
            part.region,
            tuple(specs[task_id] for task_id in part.task_ids),
            event.occurred_at,
            event.event_id,
        )
        for part in event.shares
    ]
    return _placed(state, mission, shares)


def _placed(state: State, mission: TopMission, shares: list[Share]) -> State:
    """The mission with `shares` added, those placed in a region running."""
    added = dataclasses.replace(mission, shares={**mission.shares, **{share.share_id: share for share in shares}})
    running = {share.sub_mission_id: (mission.mission_id, share.share_id) for share in shares if share.region}
    return dataclasses.replace(
        state, missions={**state.missions, mission.mission_id: added}, running={**state.running, **running}
    )


def _with_share(state: State, mission_id: str, share: Share) -> State:
    """The state with one share of a mission replaced, running again when it is placed and has no result."""
    mission = state.missions[mission_id]
    changed = dataclasses.replace(mission, shares={**mission.shares, share.share_id: share})
    running = dict(state.running)
    if share.region and share.result is None:
        running[share.sub_mission_id] = (mission_id, share.share_id)
    return dataclasses.replace(state, missions={**state.missions, mission_id: changed}, running=running)


PROJECTION: Projection[Config, State] = Projection("top", (TOP_JOURNAL,), initial, evolve, snapshot_version=1)
"""The top level's state: the fold of swarm.top.journal (live, at recovery, and in `swarmlog replay state top`)."""


# --- the decisions ---


@dataclasses.dataclass(frozen=True, slots=True)
class Receive:
    """Decide on one input: a MissionSubmitted, or a region journal's end of a sub-mission, at now_ms, with the
    regions' latest announcements."""

    event: Event
    now_ms: int
    regions: Mapping[str, Announcement] = dataclasses.field(default_factory=dict)

    @property
    def cause_id(self) -> str:
        """The id the emitted events derive theirs from."""
        return self.event.event_id


@dataclasses.dataclass(frozen=True, slots=True)
class Tick:
    """Let time pass to now_ms: shares of regions that stopped answering move, unplaced shares are placed."""

    now_ms: int
    tick_id: str
    regions: Mapping[str, Announcement] = dataclasses.field(default_factory=dict)

    @property
    def cause_id(self) -> str:
        """The id the emitted events derive theirs from."""
        return self.tick_id


Command = Receive | Tick


@dataclasses.dataclass(frozen=True, slots=True)
class Decision:
    """The journal events a command produced, and the state after them (None when there are none)."""

    events: tuple[Event, ...] = ()
    state: State | None = dataclasses.field(default=None, compare=False)


class _Draft:
    """The events decided so far, with deterministic envelopes, folded as they go."""

    def __init__(self, state: State, command: Command) -> None:
        self.state, self.cause_id, self.now_ms = state, command.cause_id, command.now_ms
        self.served = {
            region: seen
            for region, seen in command.regions.items()
            if region != TOP and seen.serves_at(command.now_ms)  # the top level announces itself beside the regions
        }
        self.regions = command.regions
        self.events: list[Event] = []

    def emit(self, kind: type[E], mission_id: str, /, **fields: Any) -> E:
        """Append an event (id f"{cause}/{index}", occurred now, caused by the command) and fold it."""
        event = kind(
            event_id=f"{self.cause_id}/{len(self.events)}",
            occurred_at=self.now_ms,
            correlation_id=mission_id,
            causation_id=self.cause_id,
            producer=PRODUCER,
            mission_id=mission_id,
            **fields,
        )
        self.events.append(event)
        self.state = evolve(self.state, event)
        return event


def decide(command: Command, state: State) -> Decision:
    """The journal events answering a command; deciding it again on the state that includes them emits nothing."""
    draft = _Draft(state, command)
    if isinstance(command, Tick):
        for mission in list(state.missions.values()):
            if mission.ended is None:
                _on_tick(draft, mission.mission_id)
    else:
        match command.event:
            case MissionSubmitted(region=region) as submitted if region == TOP:
                _on_submitted(draft, submitted)
            case MissionCompleted() | MissionFailed() | MissionRejected() as ended:
                _on_sub_mission_ended(draft, ended)
    return Decision(tuple(draft.events), draft.state if draft.events else None)


def refuse(command: Receive, state: State, reason: str) -> Decision | None:
    """The answer to a submission whose decision cannot be written (the shell found it larger than one journal write):
    MissionRejected with the reason; None for any other input (its decision has to be written)."""
    if not isinstance(command.event, MissionSubmitted):
        return None
    draft = _Draft(state, command)
    draft.emit(MissionRejected, command.event.mission_id, reason=reason)
    return Decision(tuple(draft.events), draft.state)


def _on_submitted(draft: _Draft, event: MissionSubmitted) -> None:
    """Split a new mission over the served regions by their capacity (one unplaced share when none is served)."""
    if draft.state.known(event.mission_id):
        return
    reason = _invalid(event)
    if reason is not None:
        draft.emit(MissionRejected, event.mission_id, reason=reason)
        return
    weights = split.capacity(draft.served)
    parts = split.split(event.tasks, weights) if weights else [("", [task.task_id for task in event.tasks])]
    draft.emit(
        MissionSplit,
        event.mission_id,
        title=event.title,
        submitted_at=event.occurred_at,
        shares=[
            SharePlan(f"s{index}", region, ids, draft.served[region].idle_agents if region else 0)
            for index, (region, ids) in enumerate(parts)
        ],
        tasks=event.tasks,
        consensus=event.consensus,
        final_action=event.final_action,
        deadline_at=None if event.deadline_ms is None else event.occurred_at + event.deadline_ms,
        token_budget=event.token_budget,
        submitted_by=event.submitted_by,
    )


def _invalid(event: MissionSubmitted) -> str | None:
    """Why the top level cannot split a mission, or None."""
    if event.planning is not None or not event.tasks:
        return "the top level splits a mission's explicit tasks; submit a mission with a planning step to one region"
    if event.pass_replicas:
        return "the top level does not pass replicas' outputs across its shares; submit it to one region"
    spec = event.consensus
    if not 0 < spec.quorum <= 1 or spec.window_ms < 0:
        return f"consensus needs 0 < quorum <= 1 and window_ms >= 0; got {spec}"
    return plan.problem([plan.from_record(task) for task in event.tasks])


def _on_sub_mission_ended(draft: _Draft, ended: MissionCompleted | MissionFailed | MissionRejected) -> None:
    """Record the end of a running share's sub-mission (of its current attempt only), then advance its mission."""
    running = draft.state.running.get(ended.mission_id)
    if running is None:
        return  # not a sub-mission, an attempt moved away, or one already recorded
    mission_id, share_id = running
    share = draft.state.missions[mission_id].share(share_id)
    succeeded = isinstance(ended, MissionCompleted) and ended.success
    draft.emit(
        ShareCompleted,
        mission_id,
        share_id=share_id,
        sub_mission_id=share.sub_mission_id,
        region=share.region,
        success=succeeded,
        outputs=[] if isinstance(ended, MissionRejected) else list(ended.outputs),
        reason=None if isinstance(ended, MissionCompleted) else ended.reason,
        tasks_completed=0 if isinstance(ended, MissionRejected) else ended.tasks_completed,
        tokens_used=0 if isinstance(ended, MissionRejected) else ended.tokens_used,
    )
    _advance(draft, mission_id)


def _on_tick(draft: _Draft, mission_id: str) -> None:
    """Fail a mission past its deadline; else place or move its shares that need it, and advance it."""
    mission = draft.state.missions[mission_id]
    if mission.deadline_at is not None and draft.now_ms >= mission.deadline_at:
        _end(draft, mission, MissionFailed, reason=f"deadline passed at {mission.deadline_at} ms", outputs=[])
        return
    for share in mission.shares.values():
        if share.result is None:
            _move_if_due(draft, mission_id, share)
    _advance(draft, mission_id)


def _move_if_due(draft: _Draft, mission_id: str, share: Share) -> None:
    """Place an unplaced share in the best served region, or move a share whose region has been unserved for
    `move_after_ms` to the best other one (a new attempt); nothing while no other region is served."""
    if share.region:
        since = _unserved_since(draft.regions.get(share.region), share.placed_at, draft.now_ms)
        if since is None or draft.now_ms - since < draft.state.config.move_after_ms:
            return
        reason = f"{share.region} has not been served since {since} ms"
    else:
        reason = "no region was served when it was placed"
    target = split.best(draft.served, exclude=share.region)
    if target is None:
        return
    draft.emit(
        ShareMoved,
        mission_id,
        share_id=share.share_id,
        attempt=share.attempt + 1 if share.region else share.attempt,
        from_region=share.region,
        region=target,
        idle_agents=draft.served[target].idle_agents,
        reason=reason,
    )


def _unserved_since(seen: Announcement | None, placed_at: int, now_ms: int) -> int | None:
    """Since when a share's region has not been served (never before the share was placed there); None while it is."""
    if seen is None:
        return placed_at
    if seen.serves_at(now_ms):
        return None
    stopped = seen.at_ms if not seen.serving else seen.at_ms + MISSED_INTERVALS * seen.interval_ms
    return max(stopped, placed_at)


def _advance(draft: _Draft, mission_id: str) -> None:
    """End the mission on a failed share; once every share completed, place the final action or complete it."""
    mission = draft.state.missions[mission_id]
    if mission.ended is not None:
        return
    results = [share.result for share in mission.shares.values() if share.result is not None]
    failed = next((result for result in results if not result.success), None)
    if failed is not None:
        reason = f"share {failed.share_id} failed in {failed.region}: {failed.reason}"
        _end(draft, mission, MissionFailed, reason=reason, outputs=[])
    elif len(results) == len(mission.shares):
        if mission.final_action is not None and FINAL_SHARE not in mission.shares:
            target = split.best(draft.served)
            draft.emit(
                FinalSharePlaced,
                mission_id,
                share_id=FINAL_SHARE,
                region=target or "",
                idle_agents=draft.served[target].idle_agents if target else 0,
                prompt=_final_prompt(mission.final_action, mission),
                required_capabilities=mission.final_action.required_capabilities,
            )
        else:
            final = mission.shares.get(FINAL_SHARE)
            outputs = final.result.outputs if final and final.result else [o for r in results for o in r.outputs]
            _end(draft, mission, MissionCompleted, success=True, outputs=list(outputs))


def _final_prompt(final: FinalActionSpec, mission: TopMission) -> str:
    """The final action's prompt followed by every share's outputs."""
    results = [share.result for share in mission.shares.values() if share.result is not None]
    lines = [f"- {result.share_id}: {' | '.join(result.outputs)}" for result in results]
    return "\n".join([final.prompt, "", "The shares' results:", *lines])


def _end(draft: _Draft, mission: TopMission, kind: type[MissionCompleted | MissionFailed], **fields: Any) -> None:
    """The mission's final event on the top's journal, with the totals of its shares' results."""
    results = [share.result for share in mission.shares.values() if share.result is not None]
    draft.emit(
        kind,
        mission.mission_id,
        latency_ms=draft.now_ms - mission.submitted_at,
        agent_count=0,
        tasks_completed=sum(result.tasks_completed for result in results),
        tasks_failed=0,
        tokens_used=sum(result.tokens_used for result in results),
        **fields,
    )


# --- what the decisions make regions do ---


def submissions(events: Iterable[Event], state: State) -> list[MissionSubmitted]:
    """The sub-missions that journal events placed (each once), as MissionSubmitted for swarm.missions; `state` is the
    fold that includes the events."""
    placed: dict[str, MissionSubmitted] = {}
    for event in events:
        match event:
            case MissionSplit() | ShareMoved() | FinalSharePlaced():
                mission = state.missions[event.mission_id]
                for share in mission.shares.values():
                    if share.placed_by == event.event_id and share.sub_mission_id in state.running:
                        placed[share.sub_mission_id] = submission(mission, share)
    return list(placed.values())


def pending(state: State) -> list[MissionSubmitted]:
    """The sub-mission of every share running now: re-sent at start, since a crash may have come between the
    journal's write and theirs (a region takes a mission id once, so a repeat is harmless)."""
    return [
        submission(state.missions[mission_id], state.missions[mission_id].share(share_id))
        for mission_id, share_id in state.running.values()
    ]


def submission(mission: TopMission, share: Share) -> MissionSubmitted:
    """The MissionSubmitted that runs a share in its region: its tasks, the mission's consensus, what is left of its
    deadline, its part of the token budget; no final action (the top level runs that as a share of its own)."""
    budget = mission.token_budget
    return MissionSubmitted(
        event_id=f"{PRODUCER}:{share.sub_mission_id}:submitted",
        occurred_at=share.placed_at,
        correlation_id=share.sub_mission_id,
        causation_id=share.placed_by,
        producer=PRODUCER,
        mission_id=share.sub_mission_id,
        title=f"{mission.title} [{share.share_id}]",
        region=share.region,
        tasks=list(share.tasks),
        consensus=mission.consensus,
        deadline_ms=None if mission.deadline_at is None else max(1, mission.deadline_at - share.placed_at),
        token_budget=None if budget is None else math.ceil(budget * len(share.tasks) / mission.task_count),
        submitted_by=mission.submitted_by,
    )
