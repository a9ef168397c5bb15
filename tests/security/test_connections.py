"""swarmlog's own producer and reader on the secured Kafka: SASL_SSL with each mechanism, and mutual TLS."""

from __future__ import annotations

import uuid

import pytest

from swarmlog.envelope import stamp
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import DrainRequested
from swarmlog.topics import CONTROL

from .secured import SecuredKafka


@pytest.mark.parametrize(
    ("protocol", "mechanism"),
    [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "SCRAM-SHA-256"), ("SASL_SSL", "PLAIN"), ("SSL", "SCRAM-SHA-512")],
    ids=["scram-sha-512", "scram-sha-256", "plain", "mutual-tls"],
)
async def test_a_role_writes_and_reads_a_record(secured_kafka: SecuredKafka, protocol: str, mechanism: str):
    settings = secured_kafka.settings_for("operator", protocol, mechanism)  # type: ignore[arg-type]
    event = stamp(DrainRequested, producer="test-operator", target=f"agent-{uuid.uuid4().hex[:8]}", reason="test")
    async with Collector(settings, CONTROL, start="end", keep=lambda seen: seen.event_id == event.event_id) as log:
        async with EventProducer(settings, client_id="test-operator") as producer:
            await producer.send(CONTROL, event, key=event.target)
        await log.wait_for(lambda: log.events, timeout_s=30)
    assert log.events == [event]
