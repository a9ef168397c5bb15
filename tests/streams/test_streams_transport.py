"""The worker's consumer fetches with the long poll its broker kind needs (Faust alone fixes it at 1.5 s)."""

from __future__ import annotations

from swarmlog.settings import Settings
from swarmlog.streams.app.build import build_app
from swarmlog.streams.app.config import KAFKA_FETCH_MAX_WAIT_MS, TANSU_FETCH_MAX_WAIT_MS, StreamsConfig


async def test_the_started_fetcher_waits_at_most_the_wait_chosen_for_the_broker(broker, tmp_path):
    config = StreamsConfig(Settings(broker=broker.kind, bootstrap=broker.bootstrap), data_dir=tmp_path)
    app = build_app(config)
    consumer = app.consumer._thread._create_worker_consumer(app.transport)
    await consumer.start()  # aiokafka builds its Fetcher here, from the consumer's settings
    try:
        fetch_wait = consumer._fetcher._fetch_max_wait_ms
    finally:
        await consumer.stop()
    assert fetch_wait == {"kafka": KAFKA_FETCH_MAX_WAIT_MS, "tansu": TANSU_FETCH_MAX_WAIT_MS}[broker.kind]
    assert TANSU_FETCH_MAX_WAIT_MS < 1500  # Faust's own wait, which made each hop on Tansu that slow
