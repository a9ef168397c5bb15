"""The producer's partition sets are built once per metadata update, and a grown topic's new partitions are seen."""

from __future__ import annotations

from aiokafka.cluster import ClusterMetadata
from aiokafka.protocol.metadata import MetadataResponse_v0

from swarmlog.kafka.partition_sets import cache_partition_sets


def metadata(partitions: int) -> MetadataResponse_v0:
    """A broker's metadata answer: one broker leading every partition of the topic `inbox`."""
    topic = (0, "inbox", [(0, partition, 1, [1], [1]) for partition in range(partitions)])
    return MetadataResponse_v0([(1, "localhost", 9092)], [topic])


def test_a_topics_set_is_built_once_until_the_metadata_changes():
    cluster = ClusterMetadata()
    cache_partition_sets(cluster)
    assert cluster.partitions_for_topic("inbox") is None
    cluster.update_metadata(metadata(3))
    first = cluster.partitions_for_topic("inbox")
    assert first == {0, 1, 2}
    assert cluster.partitions_for_topic("inbox") is first
    cluster.update_metadata(metadata(3))
    assert cluster.partitions_for_topic("inbox") == first
    cluster.update_metadata(metadata(5))
    assert cluster.partitions_for_topic("inbox") == {0, 1, 2, 3, 4}
    assert cluster.partitions_for_topic("other") is None
