"""The fixture layer's Docker path: Apache Kafka and Redis containers, wherever a Docker engine answers.

`SWARMLOG_BROKER=docker .venv/bin/pytest` runs the whole suite on those containers; this file checks the path
itself, and is skipped, with the engine's own answer as the reason, where no engine runs (as on the CI machines).
"""

from __future__ import annotations

import dataclasses
import uuid

import pytest
import redis
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

from swarmlog.services import open_services
from swarmlog.services.docker import docker_available
from swarmlog.settings import Settings

AVAILABLE, WHY_NOT = docker_available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)


async def test_kafka_and_redis_containers_serve_a_round_trip() -> None:
    settings = dataclasses.replace(Settings.from_env(), broker="docker", bootstrap=None, redis_url=None)
    with open_services(settings) as services:
        topic = f"docker-{uuid.uuid4().hex[:8]}"
        admin = AIOKafkaAdminClient(bootstrap_servers=services.broker.bootstrap)
        await admin.start()
        await admin.create_topics([NewTopic(topic, 1, 1)])
        await admin.close()
        producer = AIOKafkaProducer(bootstrap_servers=services.broker.bootstrap)
        async with producer:
            await producer.send_and_wait(topic, b"through docker")
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=services.broker.bootstrap, auto_offset_reset="earliest")
        async with consumer:
            record = await consumer.getone()
        assert record.value == b"through docker"
        assert services.broker.supports_transactions
        assert redis.Redis.from_url(services.redis.url).ping()
