"""Every alert the stream processors decide is a valid event of the Avro contract and survives the codec."""

from __future__ import annotations

from test_streams_budgets import run, used
from test_streams_registry import live, registered
from test_streams_waitgraph import detect, started

from swarmlog.schemas.codec import decode, encode
from swarmlog.streams import budgets, waitgraph


def test_decided_alerts_round_trip_through_the_codec():
    _, deaths = live([registered("a", 0, "r1")], 6000)
    _, deadlocks = detect(waitgraph.INITIAL, [started("w1", "a", "b"), started("w2", "b", "a")])
    _, throttles = run(budgets.INITIAL, [used("a", "g1", 0, 2000, 0), 60_000])
    alerts = deaths + deadlocks + throttles
    assert {alert.name for alert in alerts} == {
        "AgentDeclaredDead",
        "DeadlockDetected",
        "BudgetExceeded",
        "BudgetRestored",
    }
    for alert in alerts:
        assert decode(encode(alert)) == alert
