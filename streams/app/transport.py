"""Faust's aiokafka transport whose worker consumer long-polls swarmlog's short wait (Faust fixes it at 1.5 s), and an
app whose producer buffers a chunk's table writes without throttling."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import aiokafka
import faust
from faust.transport.drivers import aiokafka as driver
from faust.types import ProducerT

from swarmlog.kafka.tuning import FETCH_MAX_WAIT_MS

if TYPE_CHECKING:
    from .grouped import GroupFold

BUFFERED_WRITES = 4000
"""Changelog records the producer buffer holds before Faust stops delivering records until it drains: a few chunks'
writes (streams/app/keyed.py), where Faust's 100 made each larger chunk flush record by record, warning each time."""


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
    """The worker's Faust app, on the transport above, with a producer buffer of BUFFERED_WRITES, and the tables it
    folds on groups of their own (grouped.py), started and stopped with it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.group_folds: list[GroupFold] = []

    def group_fold(self, fold: GroupFold) -> GroupFold:
        """Run `fold` with the app; returns it."""
        self.group_folds.append(fold)
        self.service(fold)  # type: ignore[arg-type]  # typed for a service class, but starts an instance just the same
        return fold

    def _new_transport(self) -> Transport:
        return Transport(self.conf.broker_consumer, self)

    def _new_producer(self) -> ProducerT:
        producer = super()._new_producer()
        producer.buffer.max_messages = BUFFERED_WRITES
        return producer
