"""The agent's checkpoint survives closing and reopening its store, and is checked against the broker at start."""

from __future__ import annotations

import json

import pytest
from aiokafka import TopicPartition
from rocksdict import Rdict

from swarmlog.actors.domain import AgentState
from swarmlog.actors.shell.recovery import Bounds, stale
from swarmlog.actors.shell.store import KEY, AgentStore, Checkpoint


def test_a_checkpoint_survives_reopening(tmp_path):
    saved = Checkpoint(
        AgentState(
            "a", frozenset({("m", "t", 0, 2)}), {("m", "t", 0, 1): 1_000}, {"b1": 2_000}, throttled=True, seen_ms=2_000
        ),
        inbox=7,
        log={0: 3, 5: 9},
        control={1: 4},
        cluster="c-1",
    )
    store = AgentStore(tmp_path)
    assert store.load("a") is None
    store.save(saved)
    store.close()
    reopened = AgentStore(tmp_path)
    assert reopened.load("a") == saved
    reopened.close()


def test_a_checkpoint_written_before_cluster_ids_loads_with_none_known(tmp_path):
    db = Rdict(str(tmp_path))
    db[KEY] = json.dumps({"started": [], "closed": [], "ballots": [], "throttled": False, "inbox": 7, "log": {"0": 3}})
    db.close()
    store = AgentStore(tmp_path)
    assert store.load("a") == Checkpoint(AgentState("a"), 7, {0: 3}, {}, None)
    store.close()


def test_a_checkpoint_written_before_closed_attempts_had_times_loads_them_at_time_0(tmp_path):
    db = Rdict(str(tmp_path))
    db[KEY] = json.dumps(
        {
            "started": [["m", "t", 0, 1], ["m", "t", 0, 2]],
            "closed": [["m", "t", 0, 1]],
            "ballots": ["b1"],
            "throttled": False,
            "inbox": 7,
            "log": {},
        }
    )
    db.close()
    store = AgentStore(tmp_path)
    state = store.load("a").state
    store.close()
    assert state == AgentState("a", frozenset({("m", "t", 0, 2)}), {("m", "t", 0, 1): 0}, {"b1": 0})


INBOX, TASKS, CONTROL = TopicPartition("swarm.agents.inbox", 3), "swarm.tasks.events", "swarm.control"


def bounds(cluster: str | None = "c-1", start: int = 0, end: int = 10) -> Bounds:
    tps = [INBOX, TopicPartition(TASKS, 0), TopicPartition(CONTROL, 0)]
    return Bounds(cluster, {tp: start for tp in tps}, {tp: end for tp in tps})


def checkpoint(cluster: str | None = "c-1", inbox: int = 5, log: int = 5, control: int = 5) -> Checkpoint:
    return Checkpoint(AgentState("a"), inbox, {0: log}, {0: control}, cluster)


@pytest.mark.parametrize(
    ("saved", "held", "reason"),
    [
        (checkpoint(), bounds(), None),
        (checkpoint(inbox=10, log=0, control=10), bounds(), None),  # both ends of the log are positions one can hold
        (checkpoint(None), bounds(), None),  # written before cluster ids: checked by offsets
        (checkpoint(), bounds(None), None),  # a broker without a cluster id: checked by offsets
        (checkpoint("c-0"), bounds(), "taken on cluster 'c-0' and the broker is cluster 'c-1'"),
        (checkpoint(inbox=11), bounds(), "position 11 in swarm.agents.inbox[3] is past the end of the log (10)"),
        (checkpoint(log=11), bounds(), "position 11 in swarm.tasks.events[0] is past the end"),
        (checkpoint(control=2), bounds(start=3), "position 2 in swarm.control[0] is before the log start (3)"),
        (Checkpoint(AgentState("a"), 5, {7: 1}), bounds(), "swarm.tasks.events[7] does not exist"),
        (checkpoint(None, inbox=11), bounds(None), "past the end"),
    ],
)
def test_a_checkpoint_is_stale_when_it_belongs_to_another_log(saved, held, reason):
    found = stale(saved, INBOX, TASKS, CONTROL, held)
    assert (found is None) if reason is None else (found is not None and reason in found), found
