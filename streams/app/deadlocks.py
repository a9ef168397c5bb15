"""The wait-for graph and deadlock detection.

A cycle can span agents whose waits sit on different partitions of swarm.waits, so the graph must be whole in one
place: a forwarder re-keys every decodable wait record onto a one-partition internal topic, and one agent folds
that topic into a one-partition table. Exactly one worker owns that partition, so the graph is never split and a
cycle is decided once; it is changelog-backed like any table, so a restarted owner resumes from it.
The table holds the graph one row per active wait, ended wait and reported cycle (`waitgraph.table_entries`),
plus a `version` row counting writes. The owner keeps the graph itself in memory and writes only the rows a wait
changes, so a wait costs the same whatever the graph holds; it reads the rows back whenever `version` is not the
one it wrote last (at start, or after the partition was elsewhere).
A DeadlockDetected is produced before it is folded, so a crash in between repeats it with the same event_id.
Both the forwarder and the detector work in chunks (up to CHUNK waits or CHUNK_S seconds): the forwarder waits for
the broker once per chunk, the detector folds a chunk's waits in memory, one by one, and writes the rows they changed
once, with one `version` write, at the chunk's end.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import faust

from swarmlog.schemas.records import WaitEnded, WaitStarted
from swarmlog.streams.waitgraph import (
    INITIAL,
    PROJECTION,
    WaitGraph,
    decide_deadlocks,
    entry_changes,
    evolve,
    from_entries,
)

from .config import StreamsConfig
from .records import RawStream, WorkerTopics, inside, now_ms, raw_topic
from .tables import FoldTable, fold_table

WAITS, ALERTS = PROJECTION.topics
"""The waits it forwards and folds; where its deadlocks go, folded as they are sent (not read back from there)."""
WAIT_EVENTS = (WaitStarted.name, WaitEnded.name)
"""What the one-partition topic carries: only the inputs of swarm.waits are forwarded (anything else there, such as a
DeadlockDetected that would mark a cycle reported before it closes, is dead-lettered by the forwarder)."""
FORWARD_KEY = "graph"
"""The key of every record on the one-partition topic."""
VERSION = "version"
CHUNK, CHUNK_S = 500, 0.05
"""Waits forwarded, and folded, together: one wait for the broker and one table write per row per chunk, not per
wait; a wait waits at most twice CHUNK_S for its deadlock's detection, well within 1 s."""


def global_waits_topic(config: StreamsConfig) -> str:
    """The one-partition internal topic that gathers every wait record."""
    return f"{config.app_id}-waits-global"


@dataclasses.dataclass
class GraphCache:
    """The graph the owner keeps in memory, and the table version it matches."""

    graph: WaitGraph = INITIAL
    version: int = -1


def install(app: faust.App, io: WorkerTopics, config: StreamsConfig) -> FoldTable:
    """Add the wait forwarder, the global wait-graph agent and its one-partition table to `app`; returns the table."""
    table = fold_table(app, "waitgraph", partitions=1)
    global_waits = raw_topic(app, global_waits_topic(config), partitions=1, internal=True)
    io.carries(global_waits_topic(config), WAIT_EVENTS)

    async def forward(stream: RawStream) -> None:
        async for chunk in io.decoded_chunks(stream, CHUNK, CHUNK_S):
            sent = [await global_waits.send(key=FORWARD_KEY.encode(), value=record.value) for record, _ in chunk]
            for pending in sent:  # all delivered before the chunk is acknowledged
                await pending

    held = GraphCache()

    async def detect(stream: RawStream) -> None:
        async for chunk in io.decoded_chunks(stream, CHUNK, CHUNK_S):
            if not chunk:
                continue
            inside(chunk[-1][0])  # the one partition: the table is read and written inside its last event
            version = table.get(VERSION) or 0
            if held.version != version:
                held.graph, held.version = from_entries(dict(table.items())), version
            graph, rows = held.graph, dict[str, Any]()  # the rows the chunk changes; None: deleted
            for _, event in chunk:
                before = graph
                graph = evolve(before, event)
                for deadlock in decide_deadlocks(graph, now_ms(), event):
                    await io.send(ALERTS, ",".join(deadlock.cycle), deadlock)
                    graph = evolve(graph, deadlock)
                puts, deletes = entry_changes(before, graph, event)
                rows.update(dict.fromkeys(deletes))
                rows.update(puts)
            if rows:
                for key, value in rows.items():
                    if value is not None:
                        table[key] = value
                    elif key in table:
                        del table[key]
                table[VERSION] = held.version = version + 1
            held.graph = graph

    app.agent(raw_topic(app, WAITS), name="waits-forward")(forward)
    app.agent(global_waits, name="waits-graph")(detect)
    return table
