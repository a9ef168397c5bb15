"""Faust's aiokafka transport whose worker consumer long-polls as long as the app says (Faust fixes it at 1.5 s)."""

from __future__ import annotations

from typing import Any

import aiokafka
import faust
from faust.transport.drivers import aiokafka as driver


class ConsumerThread(driver.AIOKafkaConsumerThread):
    """Faust's consumer thread, whose worker consumer waits at most the app's `fetch_max_wait_ms` per fetch."""

    def _create_worker_consumer(self, transport: driver.Transport) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = self.app.fetch_max_wait_ms  # handed to aiokafka's Fetcher at start()
        return consumer


class Consumer(driver.Consumer):
    """Faust's aiokafka consumer on the thread above."""

    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(driver.Transport):
    """Faust's aiokafka transport with the consumer above."""

    Consumer = Consumer


class WorkerApp(faust.App):
    """The worker's Faust app: a fetch waits at most `fetch_max_wait_ms` for records before it returns empty."""

    def __init__(self, app_id: str, *, fetch_max_wait_ms: int, **settings: Any) -> None:
        self.fetch_max_wait_ms = fetch_max_wait_ms
        super().__init__(app_id, **settings)

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)
