"""When a running coordinator snapshots its fold: after enough journal offsets, but never twice within a few seconds
(a snapshot costs more than folding 1,000 events again), and after a while with any."""

from swarmlog.coordinator.shell.service import (
    SNAPSHOT_APART_S,
    SNAPSHOT_EVERY_EVENTS,
    SNAPSHOT_EVERY_S,
    snapshot_due,
)


def due(new_offsets: int, elapsed_s: float) -> bool:
    return snapshot_due(new_offsets, elapsed_s, SNAPSHOT_EVERY_EVENTS, SNAPSHOT_EVERY_S)


def test_nothing_new_is_never_snapshotted():
    assert not due(0, SNAPSHOT_EVERY_S * 10)


def test_enough_new_offsets_are_snapshotted_once_the_last_snapshot_is_a_few_seconds_old():
    assert not due(SNAPSHOT_EVERY_EVENTS - 1, SNAPSHOT_APART_S)
    assert due(SNAPSHOT_EVERY_EVENTS, SNAPSHOT_APART_S)


def test_a_busy_journal_is_snapshotted_at_most_once_per_few_seconds():
    assert not due(SNAPSHOT_EVERY_EVENTS * 50, SNAPSHOT_APART_S * 0.9)


def test_a_few_new_offsets_are_snapshotted_after_the_long_interval():
    assert not due(1, SNAPSHOT_EVERY_S * 0.99)
    assert due(1, SNAPSHOT_EVERY_S)


def test_a_short_interval_asked_for_wins_over_the_spacing():
    assert snapshot_due(1, 0.1, every_events=1, every_s=0.1)
