"""Recovery: the last checkpoint, checked against the broker, brought up to date with the events after it.

A checkpoint holds offsets, and an offset means something only in the log it was read from. A checkpoint is stale
when it was taken on another cluster (the cluster id it recorded is not the broker's), or when one of its positions
lies outside what the broker holds: past a partition's end (a newer, shorter log: a fresh broker, a topic recreated),
before its log start (records deleted before they were read), or in a partition the topic no longer has. aiokafka
exposes no topic ids, so the cluster id and each partition's log start and end are what is checked; a broker that
reports no cluster id is checked by offsets alone. A checkpoint written in another encoding is not used either.

A host recovers all its agents in one pass: the topics are read once, and each event is folded into the state of the
agent it is about (`actors.domain.subject`), from that agent's own saved position on.

Recovery folds exactly the agent projection's topics (its task events, its votes, its budget events), as replay does.
Without a usable checkpoint (a new agent, an empty data dir, a stale one) the agent rebuilds from the log: it folds
those topics from the log start, and reads its inbox from the log start, so that a task assigned to it and not
finished is taken up, and a finished one (its closing event folded) is not redone, nor a ballot it voted on.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.actors.domain import PROJECTION, AgentState, subject
from swarmlog.actors.shell.store import Checkpoint, Outdated
from swarmlog.errors import DecodeError, ServiceError
from swarmlog.kafka.records import TOPIC_EVENTS, input_event
from swarmlog.kafka.signing import Trust
from swarmlog.schemas.codec import Codec

TIMEOUT_S = 60


@dataclasses.dataclass(frozen=True, slots=True)
class Bounds:
    """What the broker holds now: its cluster id (None when it reports none), each partition's log start and end."""

    cluster: str | None
    starts: Mapping[TopicPartition, int]
    ends: Mapping[TopicPartition, int]


def stale(saved: Checkpoint | Outdated, inbox: TopicPartition, bounds: Bounds) -> str | None:
    """Why `saved` cannot be resumed from (another encoding, or another log than the broker's inbox partition and
    projection partitions), or None."""
    if isinstance(saved, Outdated):
        return (
            f"it is written in checkpoint encoding {saved.version} and this agent reads encoding "
            f"{PROJECTION.snapshot_version}"
        )
    if saved.slot is not None and saved.slot != inbox.partition:
        return (
            f"its inbox position is one of partition {saved.slot} and the agent's slot is now {inbox.partition} (its "
            "slot was released and it got another)"
        )
    if saved.cluster is not None and bounds.cluster is not None and saved.cluster != bounds.cluster:
        return f"it was taken on cluster {saved.cluster!r} and the broker is cluster {bounds.cluster!r}"
    positions = [(inbox, saved.inbox), *sorted(saved.positions.items())]
    for tp, offset in positions:
        where = f"{tp.topic}[{tp.partition}]"
        if tp not in bounds.ends:
            return f"{where} does not exist on this broker"
        if offset > bounds.ends[tp]:
            return f"its position {offset} in {where} is past the end of the log ({bounds.ends[tp]})"
        if offset < bounds.starts[tp]:
            return f"its position {offset} in {where} is before the log start ({bounds.starts[tp]}): unread records were deleted"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Recovered:
    """The checkpoint an agent runs from, and why its saved one was not usable (None: it was, or there was none)."""

    checkpoint: Checkpoint
    stale: str | None


async def recover(
    consumer: AIOKafkaConsumer,
    codec: Codec,
    saved: Mapping[str, tuple[TopicPartition, Checkpoint | Outdated | None]],
    folded: list[TopicPartition],
    cluster: str | None,
    trust: Trust | None = None,
) -> dict[str, Recovered]:
    """Each agent's checkpoint to run from, given its inbox partition and what its store held.

    `folded` is every partition of the projection's topics. A usable checkpoint is brought up to date with their
    events written since; otherwise the state is folded from the log start and the inbox is read from its log start.
    The topics are read once for all the agents: each event is folded into its subject's state, from that agent's
    own position on. With a `trust`, an event not signed by a principal that may write it is skipped.
    """
    everything = [*folded, *{inbox for inbox, _ in saved.values()}]
    bounds = Bounds(cluster, await consumer.beginning_offsets(everything), await consumer.end_offsets(everything))
    checkpoints: dict[str, Checkpoint] = {}
    reasons: dict[str, str | None] = {}
    for agent_id, (inbox, prior) in saved.items():
        reasons[agent_id] = None if prior is None else stale(prior, inbox, bounds)
        if not isinstance(prior, Checkpoint) or reasons[agent_id] is not None:
            prior = Checkpoint(PROJECTION.initial(agent_id), bounds.starts[inbox], {}, cluster)
        checkpoints[agent_id] = prior
    ends = {tp: bounds.ends[tp] for tp in folded}
    start = {
        agent_id: {tp: checkpoint.positions.get(tp, bounds.starts[tp]) for tp in folded}
        for agent_id, checkpoint in checkpoints.items()
    }
    try:
        async with asyncio.timeout(TIMEOUT_S):
            states = await _fold(
                consumer, codec, {agent_id: cp.state for agent_id, cp in checkpoints.items()}, start, ends, trust
            )
    except TimeoutError:
        raise ServiceError(
            f"{len(saved)} agent(s) ({', '.join(sorted(saved)[:3])}{', ...' if len(saved) > 3 else ''}) could not "
            f"read {', '.join(PROJECTION.topics)} to their end within {TIMEOUT_S} s; is the broker healthy?"
        ) from None
    return {
        agent_id: Recovered(
            dataclasses.replace(checkpoint, state=states[agent_id], positions=ends, slot=saved[agent_id][0].partition),
            reasons[agent_id],
        )
        for agent_id, checkpoint in checkpoints.items()
    }


async def _fold(
    consumer: AIOKafkaConsumer,
    codec: Codec,
    states: dict[str, AgentState],
    start: Mapping[str, Mapping[TopicPartition, int]],
    ends: Mapping[TopicPartition, int],
    trust: Trust | None,
) -> dict[str, AgentState]:
    """`states` with every event from each agent's `start` to `ends` folded into its subject's state (other agents'
    events, and commands such as a drain, change nothing: the fold replays facts, never effects)."""
    first = {tp: min(positions[tp] for positions in start.values()) for tp in ends}
    pending = [tp for tp in first if first[tp] < ends[tp]]
    consumer.assign(pending)
    for tp in pending:
        consumer.seek(tp, first[tp])
    while pending:
        for tp, records in (await consumer.getmany(*pending, timeout_ms=500)).items():
            for record in records:
                if record.offset >= ends[tp]:
                    continue
                try:
                    event = input_event(codec, record, TOPIC_EVENTS[tp.topic], trust)
                except DecodeError:  # no event of its topic: skipped, as replay skips it; dead-lettered by the live
                    continue  # readers (control) or by the topic's consumers (tasks, votes)
                agent_id = subject(event)
                if agent_id in states and record.offset >= start[agent_id][tp]:
                    states[agent_id] = PROJECTION.evolve(states[agent_id], event)
        pending = [tp for tp in pending if await consumer.position(tp) < ends[tp]]
    return states
