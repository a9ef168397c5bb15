"""The agent's checkpoint survives closing and reopening its store, and is checked against the broker at start."""

from __future__ import annotations

import dataclasses
import json

import pytest
from aiokafka import TopicPartition
from rocksdict import Rdict

from swarmlog import topics
from swarmlog.actors.domain import PROJECTION, AgentState
from swarmlog.actors.shell.recovery import Bounds, stale
from swarmlog.actors.shell.store import AgentStore, Checkpoint, Outdated, key_of

INBOX = TopicPartition(topics.INBOX, 3)
TASKS, VOTES, CONTROL = (TopicPartition(topic, 0) for topic in (topics.TASK_EVENTS, topics.VOTES, topics.CONTROL))


def test_a_checkpoint_survives_reopening(tmp_path):
    saved = Checkpoint(
        AgentState(
            "a", frozenset({("m", "t", 0, 2)}), {("m", "t", 0, 1): 1_000}, {"b1": 2_000}, throttled=True, seen_ms=2_000
        ),
        inbox=7,
        positions={TASKS: 3, TopicPartition(topics.TASK_EVENTS, 5): 9, VOTES: 2, CONTROL: 4},
        cluster="c-1",
        slot=3,
    )
    store = AgentStore(tmp_path)
    assert store.load("a") is None
    store.save(saved)
    store.close()
    reopened = AgentStore(tmp_path)
    assert reopened.load("a") == saved
    reopened.close()


def test_one_store_keeps_each_agents_checkpoint_apart(tmp_path):
    store = AgentStore(tmp_path)
    store.save(checkpoint())
    other = Checkpoint(AgentState("b", throttled=True), inbox=2, positions={CONTROL: 1})
    store.save(other)
    store.save(Checkpoint(AgentState("a"), inbox=5, positions={}))
    assert store.load("b") == other
    assert store.load("a").inbox == 5
    assert store.load("c") is None
    store.close()


def test_a_checkpoint_records_the_version_of_its_encoding(tmp_path):
    store = AgentStore(tmp_path)
    store.save(checkpoint())
    store.close()
    db = Rdict(str(tmp_path))
    assert json.loads(db[key_of("a")])["version"] == PROJECTION.snapshot_version
    db.close()


@pytest.mark.parametrize(
    ("written", "version"),
    [
        # before checkpoints recorded their version
        ({"started": [], "closed": [], "ballots": [], "throttled": False, "inbox": 7, "log": {"0": 3}}, 1),
        ({"version": PROJECTION.snapshot_version + 1}, PROJECTION.snapshot_version + 1),
    ],
)
def test_a_checkpoint_of_another_encoding_is_not_read_back_and_is_stale(tmp_path, written, version):
    db = Rdict(str(tmp_path))
    db[key_of("a")] = json.dumps(written)
    db.close()
    store = AgentStore(tmp_path)
    loaded = store.load("a")
    store.close()
    assert loaded == Outdated(version)
    reason = stale(loaded, INBOX, bounds())
    assert reason is not None and f"encoding {version}" in reason, reason


def bounds(cluster: str | None = "c-1", start: int = 0, end: int = 10) -> Bounds:
    tps = [INBOX, TASKS, VOTES, CONTROL]
    return Bounds(cluster, {tp: start for tp in tps}, {tp: end for tp in tps})


def checkpoint(
    cluster: str | None = "c-1", inbox: int = 5, tasks: int = 5, votes: int = 5, control: int = 5
) -> Checkpoint:
    return Checkpoint(AgentState("a"), inbox, {TASKS: tasks, VOTES: votes, CONTROL: control}, cluster)


@pytest.mark.parametrize(
    ("saved", "held", "reason"),
    [
        (checkpoint(), bounds(), None),
        (checkpoint(inbox=10, tasks=0, control=10), bounds(), None),  # both ends of the log are positions one can hold
        (checkpoint(None), bounds(), None),  # taken where no cluster id was known: checked by offsets
        (checkpoint(), bounds(None), None),  # a broker without a cluster id: checked by offsets
        (checkpoint("c-0"), bounds(), "taken on cluster 'c-0' and the broker is cluster 'c-1'"),
        (checkpoint(inbox=11), bounds(), "position 11 in swarm.agents.inbox[3] is past the end of the log (10)"),
        (checkpoint(tasks=11), bounds(), "position 11 in swarm.tasks.events[0] is past the end"),
        (checkpoint(votes=11), bounds(), "position 11 in swarm.consensus.votes[0] is past the end"),
        (checkpoint(control=2), bounds(start=3), "position 2 in swarm.control[0] is before the log start (3)"),
        (
            Checkpoint(AgentState("a"), 5, {TopicPartition(topics.TASK_EVENTS, 7): 1}),
            bounds(),
            "swarm.tasks.events[7] does not exist",
        ),
        (checkpoint(None, inbox=11), bounds(None), "past the end"),
        (dataclasses.replace(checkpoint(), slot=3), bounds(), None),  # taken on the agent's slot
        (  # its slot was released and it got another: an offset of partition 6 means nothing in partition 3
            dataclasses.replace(checkpoint(), slot=6),
            bounds(),
            "inbox position is one of partition 6 and the agent's slot is now 3",
        ),
    ],
)
def test_a_checkpoint_is_stale_when_it_belongs_to_another_log(saved, held, reason):
    found = stale(saved, INBOX, held)
    assert (found is None) if reason is None else (found is not None and reason in found), found
