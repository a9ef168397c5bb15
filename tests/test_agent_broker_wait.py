"""swarmlog.kafka.waiting.BrokerWait: one WARNING at each end of a wait, and the gauge kept current."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka.errors import KafkaConnectionError

from swarmlog.kafka.waiting import BrokerWait
from swarmlog.metrics import Sensor


class Gauge(Sensor):
    """Records every broker-waiting value it is told."""

    def __init__(self) -> None:
        self.values: list[float] = []

    def on_broker_waiting(self, seconds: float) -> None:
        self.values.append(seconds)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_wait_counts_from_the_last_answer_and_logs_once_at_each_end(caplog):
    gauge = Gauge()
    wait = BrokerWait(gauge, "kafka:9092", "take the agent's events")
    with caplog.at_level(logging.WARNING):
        wait.answered(1_000)
        for at_ms in (3_000, 5_000, 7_500):
            wait.failed(at_ms, KafkaConnectionError("refused"))
        wait.answered(9_000)
        wait.answered(10_000)
    assert gauge.values == [0.0, 2.0, 4.0, 6.5, 0.0, 0.0]
    assert warnings(caplog) == [
        "waiting for the broker at kafka:9092 to take the agent's events (KafkaConnectionError('refused'))",
        "the broker at kafka:9092 answers again after 8.0 s",
    ]


def test_a_wait_before_any_answer_counts_from_the_first_failure():
    gauge = Gauge()
    wait = BrokerWait(gauge, "kafka:9092", "answer")
    wait.failed(5_000, TimeoutError())
    wait.failed(6_000, TimeoutError())
    assert gauge.values == [0.0, 1.0] and wait.waiting_since_ms == 5_000


async def test_through_tells_a_pending_request_as_a_wait_and_its_answer_as_the_end(caplog):
    gauge = Gauge()
    wait = BrokerWait(gauge, "kafka:9092", "take heartbeats")

    async def sent(after_s: float) -> str:
        await asyncio.sleep(after_s)
        return "sent"

    with caplog.at_level(logging.WARNING):
        assert await wait.through(sent(0), patience_s=0.1) == "sent"
        assert await wait.through(sent(0.35), patience_s=0.1) == "sent"
    first, *waiting, last = gauge.values
    assert first == last == 0.0 and len(waiting) >= 2 and waiting == sorted(waiting) and waiting[0] >= 0.1
    assert [m.split(" (")[0].split(" after")[0] for m in warnings(caplog)] == [
        "waiting for the broker at kafka:9092 to take heartbeats",
        "the broker at kafka:9092 answers again",
    ]


async def test_through_tells_a_kafka_error_and_raises_it():
    gauge = Gauge()
    wait = BrokerWait(gauge, "kafka:9092", "take heartbeats")

    async def refused() -> None:
        raise KafkaConnectionError("refused")

    with pytest.raises(KafkaConnectionError):
        await wait.through(refused())
    assert gauge.values == [0.0] and wait.waiting_since_ms is not None


async def test_through_cancels_its_request_when_cancelled():
    wait = BrokerWait(Sensor(), "kafka:9092", "take heartbeats")
    never = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(wait.through(never, patience_s=0.01))
    await asyncio.sleep(0.05)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert never.cancelled()
