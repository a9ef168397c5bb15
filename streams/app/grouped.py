"""A keyed table folded off Faust's per-record path, on a consumer group of its own.

Faust hands a stream one record at a time, and its table writes one changelog record per change: at 2,000
heartbeats/s that took a whole core (docs/benchmarks.md). Here a group consumer reads its inputs in batches
(`getmany`), each partition's events are folded into its held rows (`keyed.PartitionRows`), and every FLUSH_S the
rows changed since are written to the table's changelog, one record per changed row however many events changed it;
the inputs' offsets are committed once those writes are acknowledged.

Recovery: the range assignor gives a member partition p of every input (they are co-partitioned), and the table's
partition p with them (so the changelog has as many partitions as the inputs: run.py creates it so, and refuses to
start on one that has not). Its rows are read back from the changelog (compacted on Kafka: CHANGELOG_CONFIGS), and its
inputs are folded again from the committed offsets, which are never ahead of the changelog. A crash between a flush's
writes and its commit folds some events twice, which every keyed fold takes as a no-op (at least once, as Faust's
tables were).
"""

from __future__ import annotations

import asyncio
import heapq
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence, Set
from typing import Any

import mode
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.coordinator.assignors.range import RangePartitionAssignor
from aiokafka.errors import IllegalStateError, KafkaError

from swarmlog.kafka.connection import client_options
from swarmlog.kafka.producer import EventProducer
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.schemas.events import Event

from .config import KAFKA_FAUST, TANSU_FAUST, StreamsConfig
from .keyed import Evolve, PartitionRows
from .records import WorkerTopics
from .tables import dump_key, dump_value, latest_rows

FLUSH_S = 2.0
"""How often changed rows are written to the changelog and the inputs committed: what a restart folds again at most."""
POLL_MS = FETCH_MAX_WAIT_MS
MAX_RECORDS = 2000
"""Records folded at most between two returns to the event loop (about 40 ms of CPU): the liveness tick waits for none
longer."""
CHANGELOG_CONFIGS = {"cleanup.policy": "compact", "segment.ms": "60000", "min.cleanable.dirty.ratio": "0.5"}
"""A changelog rolls a segment a minute, so compaction keeps what a restore reads near one row per key (Kafka; Tansu
does not compact, and a restore there reads the whole changelog)."""
Folded = list[tuple[Event, Any]]
"""Events with their key's row right after each (None: none)."""
logger = logging.getLogger(__name__)


def changelog_topic(app_id: str, table: str) -> str:
    """The changelog of a worker's table (the name Faust gave its tables', which `swarmlog replay diff` reads)."""
    return f"{app_id}-{table}-changelog"


def group_of(app_id: str, table: str) -> str:
    """The consumer group that folds a worker's table."""
    return f"{app_id}-{table}"


class GroupFold(mode.Service):
    """One keyed table: the group consuming its inputs, the rows of each assigned partition, and its changelog."""

    def __init__(
        self,
        config: StreamsConfig,
        io: WorkerTopics,
        table: str,
        topics: Sequence[str],
        key_of: Callable[[Event], str | None],
        evolve: Evolve,
        expires_at: Callable[[Any], int | None],
        on_folded: Callable[[Folded], Awaitable[None]],
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.table, self.topics = table, tuple(topics)
        self.changelog, self.group = changelog_topic(config.app_id, table), group_of(config.app_id, table)
        self.generation = 0
        """Counts the rebalances: what was decided for the partitions held before is forgotten when it changes."""
        self._config, self._io = config, io
        self._key_of, self._evolve, self._expires_at, self._on_folded = key_of, evolve, expires_at, on_folded
        self._rows: dict[int, PartitionRows] = {}
        self._written: dict[int, int] = {}  # the changelog's end offset per held partition after this member's writes
        self._assigned: frozenset[TopicPartition] = frozenset()
        self._next: dict[TopicPartition, int] = {}  # the next offset to fold per assigned input partition
        self._committed: dict[TopicPartition, int] = {}
        self._settled = False
        self._lock = asyncio.Lock()  # a batch's fold and flush, and a rebalance, one at a time
        self._consumer: AIOKafkaConsumer | None = None
        self._producer: EventProducer | None = None
        self._folding: asyncio.Task[None] | None = None
        self._stopping = False
        self._pending: frozenset[TopicPartition] | None = None  # an assignment whose rows are not held yet

    async def on_start(self) -> None:
        settings = self._config.settings
        tansu = settings.broker == "tansu"
        # The Faust app's own client settings per broker (config.py says why each): Tansu loses changelog records of
        # multi-record batches, and its groups loop forever on JoinGroup once a static member is in them.
        faust = TANSU_FAUST if tansu else KAFKA_FAUST
        batching: dict[str, Any] = (
            {"max_batch_size": TANSU_FAUST["producer_max_batch_size"]}
            if tansu
            else {"linger_ms": int(KAFKA_FAUST["producer_linger"] * 1000)}
        )
        self._producer = EventProducer(settings, client_id=self.group, **batching)
        await self._producer.start()
        membership = {} if tansu else {"group_instance_id": f"{self._config.group_instance_id}-{self.table}"}
        self._consumer = AIOKafkaConsumer(
            **client_options(settings),
            client_id=self.group,
            group_id=self.group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=FETCH_MAX_WAIT_MS,
            partition_assignment_strategy=(RangePartitionAssignor,),
            session_timeout_ms=int(faust["broker_session_timeout"] * 1000),
            heartbeat_interval_ms=int(faust["broker_heartbeat_interval"] * 1000),
            **membership,
        )
        self._consumer.subscribe(list(self.topics), listener=_Rebalance(self))
        await self._consumer.start()
        self._folding = asyncio.create_task(self._fold_forever(), name=f"fold {self.table}")

    async def on_stop(self) -> None:
        """Finish the batch in hand, write and commit what is folded, then leave the group."""
        self._stopping = True
        if self._folding is not None:
            await asyncio.gather(self._folding, return_exceptions=True)
        try:
            async with self._lock:
                await self._flush()
        finally:
            if self._consumer is not None:
                await self._consumer.stop()
            if self._producer is not None:
                await self._producer.stop()

    def settled(self) -> bool:
        """True outside rebalances once the assigned partitions' rows are restored and their positions known."""
        return self._settled and self._assigned <= self._next.keys()

    def assigned(self) -> list[TopicPartition]:
        """The input partitions this member folds now."""
        return list(self._assigned)

    def folded_to(self, ends: Mapping[TopicPartition, int | None]) -> bool:
        """Whether every record before each partition's given end offset is folded (None: unknown, so not)."""
        return all(end is not None and (end == 0 or self._next.get(tp, -1) >= end) for tp, end in ends.items())

    def caught_up(self) -> bool:
        """Whether every assigned partition is folded up to its last fetch's high-water mark."""
        consumer = self._consumer
        return (
            consumer is not None
            and self.settled()
            and self.folded_to({tp: consumer.highwater(tp) for tp in self._assigned})
        )

    def items(self) -> dict[str, Any]:
        """Every row of the assigned partitions, as folded so far (for a timer, between batches)."""
        partitions = {tp.partition for tp in self._assigned}
        return {key: value for p in partitions if p in self._rows for key, value in self._rows[p].rows.items()}

    async def _fold_forever(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        flushed, failing = time.monotonic(), False
        try:
            while not self._stopping:
                await self._adopt_pending()  # one a rebalance could not finish
                try:
                    batch = await consumer.getmany(timeout_ms=POLL_MS, max_records=MAX_RECORDS)
                    positions = await self._positions()
                except KafkaError as exc:  # aiokafka retries an unreachable broker itself; anything else, once a second
                    if not failing:
                        logger.warning("reading the %s inputs failed (%r); trying again", self.table, exc)
                    failing = True
                    await asyncio.sleep(1)
                    continue
                failing = False
                async with self._lock:
                    for tp, offset in positions.items():
                        if tp in self._assigned and tp not in self._next:
                            self._next[tp] = offset
                    unheld = await self._fold(batch)
                    if time.monotonic() - flushed >= FLUSH_S:
                        await self._flush()
                        flushed = time.monotonic()
                await self._fetch_again(unheld)
        except Exception as exc:  # a fold that stopped must stop the worker, not leave it running without liveness
            logger.critical("the %s fold stopped: %r; the worker stops", self.table, exc)
            await self.crash(exc)

    async def _positions(self) -> dict[TopicPartition, int]:
        """Where each newly assigned partition resumes: its committed offset, or its log start (asked outside the lock:
        the answer may wait for the group, whose rebalance waits for the lock)."""
        consumer = self._consumer
        assert consumer is not None
        positions = {}
        for tp in self._assigned - self._next.keys():
            try:
                positions[tp] = await consumer.position(tp)
            except IllegalStateError:  # revoked meanwhile
                continue
        return positions

    async def _fold(self, batch: Mapping[TopicPartition, list[ConsumerRecord]]) -> dict[TopicPartition, int]:
        """Fold a batch partition by partition, each partition's inputs merged in timestamp order; returns the first
        offset of each run not folded, its partition's rows not held."""
        by_partition, unheld = split_batch(batch, self._assigned)
        folded: Folded = []
        for partition, runs in by_partition.items():
            rows = self._rows[partition]
            merged: Iterable[ConsumerRecord] = runs[0] if len(runs) == 1 else heapq.merge(*runs, key=_timestamp)
            for record in merged:
                event = await self._io.input_of(record)
                if event is not None:
                    folded.append((event, rows.fold(event, self._key_of(event), self._evolve)))
            for run in runs:
                self._next[TopicPartition(run[-1].topic, run[-1].partition)] = run[-1].offset + 1
        if folded:
            await self._on_folded(folded)
        return unheld

    async def _fetch_again(self, unheld: Mapping[TopicPartition, int]) -> None:
        """Put the consumer back to the first record not folded of each partition it has read past (asked outside the
        lock, as `_positions`). aiokafka hands out a new assignment's records as soon as it is set, and a restore
        that failed leaves its rows unheld while the fold loop reads on: records skipped then would never be folded
        (heartbeats lost, agents declared dead). The consumer only goes back: records folded twice are a no-op, and a
        position reset by a rebalance since is left as it is; a partition revoked meanwhile is its next owner's."""
        consumer = self._consumer
        assert consumer is not None
        for tp, offset in unheld.items():
            try:
                if await consumer.position(tp) > offset:
                    consumer.seek(tp, offset)
            except IllegalStateError:
                continue

    async def _flush(self) -> None:
        """Write every held partition's changed rows to the changelog, then commit the inputs folded into them."""
        producer, consumer = self._producer, self._consumer
        if producer is None or consumer is None:
            return
        taken = [(partition, rows, rows.changes()) for partition, rows in self._rows.items()]
        try:
            sent = [
                (
                    partition,
                    await producer.raw.send(self.changelog, _value(value), key=dump_key(key), partition=partition),
                )
                for partition, _, changes in taken
                for key, value in changes.items()
            ]
            for partition, done in sent:
                self._written[partition] = max(self._written.get(partition, 0), (await done).offset + 1)
        except BaseException as exc:  # cancelled or failed: the rows stay changed, the inputs uncommitted
            for _, rows, changes in taken:
                rows.mark_changed(changes)
            if not isinstance(exc, KafkaError):
                raise
            logger.warning("could not write the %s changelog (%r); retrying at the next flush", self.table, exc)
            return
        self._io.sensor.on_produced(self.changelog, len(sent))
        offsets = {tp: offset for tp, offset in self._next.items() if self._committed.get(tp) != offset}
        if not offsets:
            return
        try:
            await consumer.commit(offsets)
        except KafkaError as exc:  # CommitFailedError among them: a rebalance under way; the next owner refolds
            logger.warning(
                "could not commit the %s inputs (%r); they are folded again after a restart", self.table, exc
            )
            return
        self._committed.update(offsets)

    async def revoked(self) -> None:
        """Before a rebalance: write and commit what is folded; nothing is folded until the next assignment."""
        async with self._lock:
            self._settled, self._pending = False, None
            self.generation += 1
            await self._flush()
            self._assigned = frozenset()

    async def assigned_now(self, assigned: Iterable[TopicPartition]) -> None:
        """After a rebalance: hold the new assignment's rows (the fold loop tries again if this cannot finish)."""
        self._pending = frozenset(assigned)
        await self._adopt_pending()

    async def _adopt_pending(self) -> None:
        """Hold the rows of the assignment not held yet; a broker error leaves it pending, to be tried again."""
        pending = self._pending
        if pending is None:
            return
        try:
            await self._adopt(pending)
        except KafkaError as exc:
            logger.warning("could not restore the %s partitions yet (%r); trying again", self.table, exc)
            return
        if self._pending is pending:
            self._pending = None

    async def _adopt(self, assigned: frozenset[TopicPartition]) -> None:
        """Restore the rows of each assigned partition not held, or written by another member since, from the
        changelog; the inputs resume at their committed offsets. Nothing changes until every read is done: an
        adoption cut short (a broker error, a cancelled rebalance) leaves the fold as it was."""
        async with self._lock:
            if self._settled and assigned == self._assigned:
                return  # adopted meanwhile (by the rebalance, or by the fold loop)
            partitions = {tp.partition for tp in assigned}
            ends = await self._changelog_ends(partitions)
            stale = {p for p in partitions if p not in self._rows or self._written.get(p) != ends[p]}
            started = time.monotonic()
            restored = await self._restore(stale)
            for p in set(self._rows) - partitions | stale:
                self._rows.pop(p, None)
                self._written.pop(p, None)
            for p, rows in restored.items():
                self._rows[p] = PartitionRows(rows, self._expires_at)
                self._written[p] = ends[p]
            kept = {tp for tp in assigned if tp.partition not in stale}
            self._next = {tp: offset for tp, offset in self._next.items() if tp in kept}
            self._committed = {tp: offset for tp, offset in self._committed.items() if tp in kept}
            self._assigned, self._settled = assigned, True
            self.generation += 1
            if stale:
                logger.info(
                    "%s: restored partitions %s (%d rows) from %s in %.2f s",
                    self.table,
                    sorted(stale),
                    sum(map(len, restored.values())),
                    self.changelog,
                    time.monotonic() - started,
                )

    async def _changelog_ends(self, partitions: Iterable[int]) -> dict[int, int]:
        consumer = self._consumer
        assert consumer is not None
        tps = [TopicPartition(self.changelog, p) for p in partitions]
        ends: dict[TopicPartition, int] = await consumer.end_offsets(tps) if tps else {}
        return {tp.partition: offset for tp, offset in ends.items()}

    async def _restore(self, partitions: set[int]) -> dict[int, dict[str, Any]]:
        """The rows of each partition as its changelog holds them (the latest value per key; a record that is not a
        row is skipped with a WARNING: whoever can write the changelog cannot stop the worker)."""
        if not partitions:
            return {}
        settings = self._config.settings
        restorer = reader(settings, f"{self.group}-restore", transactional=False)
        await restorer.start()
        rows: dict[int, dict[str, Any]] = {}
        try:
            tps = [TopicPartition(self.changelog, p) for p in sorted(partitions)]
            restorer.assign(tps)
            await restorer.seek_to_beginning(*tps)
            for tp in tps:
                rows[tp.partition], skipped = latest_rows([record async for record in records_to_end(restorer, tp)])
                for record, exc in skipped:
                    logger.warning("skipped %s[%d]@%d: not a row (%s)", tp.topic, tp.partition, record.offset, exc)
        finally:
            await restorer.stop()
        return rows


def split_batch(
    batch: Mapping[TopicPartition, list[ConsumerRecord]], held: Set[TopicPartition]
) -> tuple[dict[int, list[list[ConsumerRecord]]], dict[TopicPartition, int]]:
    """A batch's runs of the `held` partitions, grouped by partition number (the inputs are co-partitioned), and for
    each other partition the offset of its first record, to fetch it again from there."""
    by_partition: dict[int, list[list[ConsumerRecord]]] = {}
    unheld: dict[TopicPartition, int] = {}
    for tp, run in batch.items():
        if not run:
            continue
        if tp in held:
            by_partition.setdefault(tp.partition, []).append(run)
        else:
            unheld[tp] = run[0].offset
    return by_partition, unheld


def _value(row: Any) -> bytes | None:
    """A row's changelog value; None for a dropped row: a tombstone, which compaction drops."""
    return None if row is None else dump_value(row)


def _timestamp(record: ConsumerRecord) -> int:
    return int(record.timestamp)


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]  # aiokafka ships no types
    """Hands the group's rebalances to the fold."""

    def __init__(self, fold: GroupFold) -> None:
        self._fold = fold

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._fold.revoked()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        await self._fold.assigned_now(assigned)
