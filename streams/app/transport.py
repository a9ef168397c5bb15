"""Faust's aiokafka transport whose worker consumer long-polls swarmlog's short wait (Faust fixes it at 1.5 s)."""

from __future__ import annotations

import aiokafka
import faust
from faust.transport.drivers import aiokafka as driver

from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS


class ConsumerThread(driver.AIOKafkaConsumerThread):
    """Faust's consumer thread, whose worker consumer waits at most FETCH_MAX_WAIT_MS per fetch."""

    def _create_worker_consumer(self, transport: driver.Transport) -> aiokafka.AIOKafkaConsumer:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # handed to aiokafka's Fetcher at start()
        return consumer


class Consumer(driver.Consumer):
    """Faust's aiokafka consumer on the thread above."""

    def _new_consumer_thread(self) -> ConsumerThread:
        return ConsumerThread(self, loop=self.loop, beacon=self.beacon)


class Transport(driver.Transport):
    """Faust's aiokafka transport with the consumer above."""

    Consumer = Consumer


class WorkerApp(faust.App):
    """The worker's Faust app, on the transport above."""

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)
