"""The wait-for graph and deadlock detection.

A cycle can span agents whose waits sit on different partitions of swarm.waits, so the graph must be whole in one
place: a forwarder re-keys every decodable wait record onto a one-partition internal topic, and one agent folds
that topic into a one-partition table holding the whole graph under a single key. Exactly one worker owns that
partition, so the graph is never split and a cycle is decided once; it is changelog-backed like any table, so a
restarted owner resumes from it. The cost is that the graph lives on one worker: fine for the active waits of
hundreds of agents (a few hundred edges, plus ended waits kept for the retention).
A DeadlockDetected is produced before it is folded, so a crash in between repeats it with the same event_id.
The forwarder works in chunks (up to CHUNK waits or CHUNK_S seconds). The detector cannot: Faust writes a table
only inside a stream's current event, so the graph, pickled whole, is written per wait and its cost grows with the
graph (ended waits are kept for the retention): the known limit of this processor's throughput.
"""

from __future__ import annotations

import faust

from swarmlog.streams.waitgraph import INITIAL, decide_deadlocks, evolve

from .config import StreamsConfig
from .records import Io, now_ms, raw_topic
from .tables import fold_table

WAITS = "swarm.waits"
ALERTS = "swarm.alerts"
GRAPH_KEY = "graph"
CHUNK, CHUNK_S = 500, 0.1
"""Waits forwarded together: one wait for the broker per chunk, not per wait; still well within 1 s."""


def global_waits_topic(config: StreamsConfig) -> str:
    """The one-partition internal topic that gathers every wait record."""
    return f"{config.app_id}-waits-global"


def install(app: faust.App, io: Io, config: StreamsConfig) -> faust.Table:
    """Add the wait forwarder, the global wait-graph agent and its one-partition table to `app`; returns the table."""
    table = fold_table(app, "waitgraph", partitions=1)
    global_waits = raw_topic(app, global_waits_topic(config), partitions=1, internal=True)

    async def forward(stream: faust.StreamT) -> None:
        async for chunk in io.decoded_chunks(stream, CHUNK, CHUNK_S):
            sent = [await global_waits.send(key=GRAPH_KEY.encode(), value=record.value) for record, _ in chunk]
            for pending in sent:  # all delivered before the chunk is acknowledged
                await pending

    async def detect(stream: faust.StreamT) -> None:
        async for _, event in io.decoded(stream):  # per event: a table is written inside a stream's event
            before = table.get(GRAPH_KEY) or INITIAL
            graph = evolve(before, event)
            for deadlock in decide_deadlocks(graph, now_ms(), event):
                await io.send(ALERTS, ",".join(deadlock.data["cycle"]), deadlock)
                graph = evolve(graph, deadlock)
            if graph != before:
                table[GRAPH_KEY] = graph

    app.agent(raw_topic(app, WAITS), name="waits-forward")(forward)
    app.agent(global_waits, name="waits-graph")(detect)
    return table
