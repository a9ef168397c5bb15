"""Which runs of a fetched batch the group fold folds now, and where it reads again the runs it cannot fold yet."""

from __future__ import annotations

from aiokafka import ConsumerRecord, TopicPartition

from swarmlog.streams.app.grouped import split_batch


def run(topic: str, partition: int, offsets: range) -> list[ConsumerRecord]:
    """Records of one partition at `offsets`, as a fetch returns them."""
    return [ConsumerRecord(topic, partition, offset, 0, 0, None, b"event", None, 0, 5, []) for offset in offsets]


def test_the_held_partitions_runs_are_grouped_by_partition_and_each_other_run_is_read_again_from_its_first_record():
    beats0, beats1, registry0 = (TopicPartition(t, p) for t, p in (("beats", 0), ("beats", 1), ("registry", 0)))
    registry1 = TopicPartition("registry", 1)
    batch = {
        beats0: run("beats", 0, range(10, 13)),
        registry0: run("registry", 0, range(4, 5)),
        beats1: run("beats", 1, range(7, 9)),  # its rows are still being restored
        registry1: [],
    }

    by_partition, unheld = split_batch(batch, {beats0, registry0, registry1})

    assert by_partition == {0: [batch[beats0], batch[registry0]]}
    assert unheld == {beats1: 7}


def test_a_batch_while_no_rows_are_held_folds_nothing_and_reads_every_run_again():
    batch = {TopicPartition("beats", p): run("beats", p, range(3 * p, 3 * p + 2)) for p in range(3)}

    by_partition, unheld = split_batch(batch, frozenset())

    assert by_partition == {}
    assert unheld == {TopicPartition("beats", p): 3 * p for p in range(3)}
