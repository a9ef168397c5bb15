"""Recovery: the last checkpoint, checked against the broker, brought up to date with the agent's own events after it.

A checkpoint holds offsets, and an offset means something only in the log it was read from. A checkpoint is stale
when it was taken on another cluster (the cluster id it recorded is not the broker's), or when one of its positions
lies outside what the broker holds: past a partition's end (a newer, shorter log: a fresh broker, a topic recreated),
before its log start (records deleted before they were read), or in a partition the topic no longer has. aiokafka
exposes no topic ids, so the cluster id and each partition's log start and end are what is checked; a broker that
reports no cluster id is checked by offsets alone.

Without a usable checkpoint (a new agent, an empty data dir, a stale one) the agent rebuilds from the log: it folds
its task events and its budget events from the log start, and reads its inbox from the log start, so that a task
assigned to it and not finished is taken up, and a finished one (its closing event folded) is not redone.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping

from aiokafka import AIOKafkaConsumer, TopicPartition

from swarmlog.actors.domain import AgentState, evolve, initial
from swarmlog.actors.shell.store import Checkpoint
from swarmlog.errors import DecodeError, ServiceError
from swarmlog.schemas.codec import Codec

TIMEOUT_S = 60


@dataclasses.dataclass(frozen=True, slots=True)
class Bounds:
    """What the broker holds now: its cluster id (None when it reports none), each partition's log start and end."""

    cluster: str | None
    starts: Mapping[TopicPartition, int]
    ends: Mapping[TopicPartition, int]


def stale(saved: Checkpoint, inbox: TopicPartition, tasks: str, control: str, bounds: Bounds) -> str | None:
    """Why `saved` cannot be resumed from on this broker (its inbox partition, its task and control topics), or None."""
    if saved.cluster is not None and bounds.cluster is not None and saved.cluster != bounds.cluster:
        return f"it was taken on cluster {saved.cluster!r} and the broker is cluster {bounds.cluster!r}"
    positions = [
        (inbox, saved.inbox),
        *((TopicPartition(tasks, p), o) for p, o in sorted(saved.log.items())),
        *((TopicPartition(control, p), o) for p, o in sorted(saved.control.items())),
    ]
    for tp, offset in positions:
        where = f"{tp.topic}[{tp.partition}]"
        if tp not in bounds.ends:
            return f"{where} does not exist on this broker"
        if offset > bounds.ends[tp]:
            return f"its position {offset} in {where} is past the end of the log ({bounds.ends[tp]})"
        if offset < bounds.starts[tp]:
            return f"its position {offset} in {where} is before the log start ({bounds.starts[tp]}): unread records were deleted"
    return None


async def recover(
    consumer: AIOKafkaConsumer,
    codec: Codec,
    agent_id: str,
    inbox: TopicPartition,
    tasks: list[TopicPartition],
    control: list[TopicPartition],
    saved: Checkpoint | None,
    cluster: str | None,
) -> tuple[Checkpoint, str | None]:
    """The checkpoint to run from, and why the saved one was stale (None when it was used or there was none).

    A usable checkpoint is brought up to date with the agent's task events (`tasks`) and budget events (`control`)
    written since; otherwise the state is folded from the log start and the inbox is read from its log start.
    """
    everything = [*tasks, *control, inbox]
    bounds = Bounds(cluster, await consumer.beginning_offsets(everything), await consumer.end_offsets(everything))
    reason = None if saved is None else stale(saved, inbox, tasks[0].topic, control[0].topic, bounds)
    if saved is None or reason is not None:
        saved = Checkpoint(initial(agent_id), bounds.starts[inbox], {}, {}, cluster)
    start = {tp: saved.log.get(tp.partition, bounds.starts[tp]) for tp in tasks}
    start |= {tp: saved.control.get(tp.partition, bounds.starts[tp]) for tp in control}
    try:
        async with asyncio.timeout(TIMEOUT_S):
            state = await _fold(consumer, codec, saved.state, start, bounds.ends)
    except TimeoutError:
        raise ServiceError(
            f"agent {agent_id} could not read its task and control events to their end within "
            f"{TIMEOUT_S} s; is the broker healthy?"
        ) from None
    return Checkpoint(
        state,
        saved.inbox,
        {tp.partition: bounds.ends[tp] for tp in tasks},
        {tp.partition: bounds.ends[tp] for tp in control},
        cluster,
    ), reason


async def _fold(
    consumer: AIOKafkaConsumer,
    codec: Codec,
    state: AgentState,
    start: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
) -> AgentState:
    """`state` with every event from `start` to `ends` folded in (other agents' events, and commands such as a
    drain, change nothing: the fold replays facts, never effects)."""
    pending = [tp for tp in start if start[tp] < ends[tp]]
    consumer.assign(pending)
    for tp in pending:
        consumer.seek(tp, start[tp])
    while pending:
        for tp, records in (await consumer.getmany(*pending, timeout_ms=500)).items():
            for record in records:
                if record.offset >= ends[tp]:
                    continue
                try:
                    state = evolve(
                        state, codec.decode_record(record.value or b"", tp.topic, tp.partition, record.offset)
                    )
                except DecodeError:
                    continue  # dead-lettered by the live readers (control) or by the topic's consumers (tasks)
        pending = [tp for tp in pending if await consumer.position(tp) < ends[tp]]
    return state
