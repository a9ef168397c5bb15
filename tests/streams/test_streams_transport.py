"""The worker's consumer fetches with swarmlog's short long poll (Faust alone fixes it at 1.5 s)."""

from __future__ import annotations

from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS
from swarmlog.settings import Settings
from swarmlog.streams.app.build import build_app
from swarmlog.streams.app.config import StreamsConfig


async def test_the_started_fetcher_waits_at_most_swarmlogs_fetch_wait(broker, tmp_path):
    config = StreamsConfig(Settings(broker=broker.kind, bootstrap=broker.bootstrap), data_dir=tmp_path)
    app = build_app(config)
    consumer = app.consumer._thread._create_worker_consumer(app.transport)
    await consumer.start()  # aiokafka builds its Fetcher here, from the consumer's settings
    try:
        fetch_wait = consumer._fetcher._fetch_max_wait_ms
    finally:
        await consumer.stop()
    assert fetch_wait == FETCH_MAX_WAIT_MS < 1500  # 1500: Faust's own wait, each hop's cost on Tansu
