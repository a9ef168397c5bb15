"""Creating a test's own topic on the test's broker, for tests that write records the catalog has no topic for."""

from __future__ import annotations

from aiokafka.admin import AIOKafkaAdminClient, NewTopic


async def create_topic(bootstrap: str, name: str, partitions: int = 1) -> str:
    """Create the topic `name` (replication 1) and return its name."""
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)])
    finally:
        await admin.close()
    return name
