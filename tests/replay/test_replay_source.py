"""Reading the log up to an offset or a time gives the same records on Apache Kafka (a seek) and on Tansu (a scan
cut where the seek would cut), even where timestamps do not rise with offsets."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from aiokafka import AIOKafkaProducer
from kafka_topics import create_topic

from swarmlog.replay.source import TANSU_NOTE, Span, read
from swarmlog.settings import Settings

T0 = time.time_ns() // 1_000_000 - 3_600_000  # an hour ago: inside the topic's retention, not in the future
# Partition 0's third record is stamped before its second, as a producer with a lagging clock would.
STAMPS = {0: [1000, 5000, 2000, 6000], 1: [3000, 4000]}


@pytest.fixture(scope="module")
def topic(settings: Settings) -> str:
    """A fresh two-partition topic holding STAMPS' records, valued "partition:offset"."""
    name = f"replay-source-{uuid.uuid4().hex[:8]}"
    asyncio.run(_fill(settings, name))
    return name


async def _fill(settings: Settings, name: str) -> None:
    await create_topic(settings.bootstrap, name, partitions=2)
    producer = AIOKafkaProducer(bootstrap_servers=settings.bootstrap)
    await producer.start()
    try:
        for partition, stamps in STAMPS.items():
            for offset, stamp in enumerate(stamps):
                await producer.send_and_wait(
                    name, f"{partition}:{offset}".encode(), partition=partition, timestamp_ms=T0 + stamp
                )
    finally:
        await producer.stop()


@pytest.mark.parametrize(
    ("span", "expected"),
    [
        (Span(), {"0:0", "0:1", "0:2", "0:3", "1:0", "1:1"}),
        (Span(to_ms=T0 + 4500), {"0:0", "1:0", "1:1"}),  # partition 0 stops at 5000: its 2000 after it is not read
        (Span(from_ms=T0 + 1500), {"0:1", "0:2", "0:3", "1:0", "1:1"}),
        (Span(from_ms=T0 + 2500, to_ms=T0 + 5500), {"0:1", "1:0", "1:1"}),  # 2000 is inside the cut, before from_ms
        (Span(from_offset=1, to_offset=2), {"0:1", "0:2", "1:1"}),
    ],
    ids=["all", "to a time", "from a time", "between times", "between offsets"],
)
def test_a_span_reads_the_same_records_on_either_broker(settings: Settings, topic: str, span: Span, expected: set):
    reading = asyncio.run(read(settings, [topic], span))
    assert {record.value.decode() for record in reading.records} == expected
    timed = span.from_ms is not None or span.to_ms is not None
    assert reading.notes == ((TANSU_NOTE,) if timed and settings.broker == "tansu" else ())


def test_a_topic_the_broker_does_not_have_is_named(settings: Settings):
    missing = f"replay-missing-{uuid.uuid4().hex[:8]}"
    reading = asyncio.run(read(settings, [missing]))
    assert reading.records == () and reading.absent == (missing,)
