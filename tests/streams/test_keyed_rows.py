"""A keyed table's held rows (streams/app/keyed.py): whatever the chunks and whatever the table held before, rows
flushed to a changelog end as the pure fold of the same events, expired rows gone."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from hypothesis import given, settings
from hypothesis import strategies as st
from streams_builders import stable
from test_streams_expiry import agent_lives
from test_streams_registry import registered

from swarmlog.schemas.events import Event
from swarmlog.streams import registry
from swarmlog.streams.app.keyed import PartitionRows


def churn(agents: int, seed: int) -> list[Event]:
    """Agents coming, beating and going (deregistered, or silent and then declared dead), then a newcomer after the
    registry keeps a gone agent's view."""
    state, events, now = registry.INITIAL, list[Event](), 0
    for now, inputs in agent_lives(agents, seed):
        state = registry.evolve_all(state, inputs)
        deaths = registry.decide_liveness(state, now)
        state = registry.evolve_all(state, deaths)
        events += [*inputs, *deaths]
    return [*events, registered("newcomer", now, "run-new")]


EVENTS = churn(40, seed=3)


def chunks(events: Sequence[Event], sizes: Sequence[int]) -> Iterator[Sequence[Event]]:
    """`events` cut into consecutive chunks of the given sizes, in turn."""
    start, turn = 0, 0
    while start < len(events):
        size = sizes[turn % len(sizes)]
        yield events[start : start + size]
        start, turn = start + size, turn + 1


@settings(max_examples=40, deadline=None)
@given(held=st.integers(0, len(EVENTS)), sizes=st.lists(st.integers(1, 500), min_size=1, max_size=8))
def test_rows_flushed_after_any_chunks_are_the_pure_fold_and_a_flush_names_each_changed_row_once(held, sizes):
    before = dict(registry.evolve_all(registry.INITIAL, EVENTS[:held]).agents)
    rows, changelog = PartitionRows(dict(before), registry.expires_at), dict(before)
    for chunk in chunks(EVENTS[held:], sizes):
        for each in chunk:
            rows.fold(each, registry.agent_of(each), registry.evolve_agent)
        changes = rows.changes()
        for key, value in changes.items():  # as a compacted changelog applies them: None is a tombstone
            if value is None:
                changelog.pop(key, None)
            else:
                changelog[key] = value
        assert changelog == rows.rows
        assert not rows.changes(), "a flush takes the changes: the next one starts empty"
    assert stable(changelog) == stable(dict(registry.evolve_all(registry.INITIAL, EVENTS).agents))


def test_rows_whose_write_failed_are_in_the_next_flush():
    rows = PartitionRows({}, registry.expires_at)
    for each in EVENTS[:5]:
        rows.fold(each, registry.agent_of(each), registry.evolve_agent)
    failed = rows.changes()
    assert failed and not rows.changes()
    rows.mark_changed(failed)
    assert rows.changes() == failed


def test_the_churn_expires_rows_so_a_chunk_deletes_some():
    assert list(registry.evolve_all(registry.INITIAL, EVENTS).agents) == ["newcomer"]
