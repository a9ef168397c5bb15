"""A keyed table folded a chunk at a time (streams/app/keyed.py): whatever the chunks, and whatever the table held
before, it ends as the pure fold of the same events, expired rows gone, each chunk writing a changed row once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from streams_builders import stable
from test_streams_expiry import agent_lives
from test_streams_registry import registered

from swarmlog.schemas.events import Event
from swarmlog.streams import registry
from swarmlog.streams.app.keyed import PartitionRows


class CountingTable(dict[str, Any]):
    """A table that counts its writes (values and deletions) per key."""

    def __init__(self, rows: dict[str, Any]) -> None:
        super().__init__(rows)
        self.writes: Counter[str] = Counter()

    def __setitem__(self, key: str, value: Any) -> None:
        self.writes[key] += 1
        super().__setitem__(key, value)

    def __delitem__(self, key: str) -> None:
        self.writes[key] += 1
        super().__delitem__(key)


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
def test_a_table_folded_in_any_chunks_is_the_pure_fold_and_each_chunk_writes_a_row_once(held, sizes):
    before = dict(registry.evolve_all(registry.INITIAL, EVENTS[:held]).agents)
    rows, table = PartitionRows(dict(before), registry.expires_at), CountingTable(before)
    for chunk in chunks(EVENTS[held:], sizes):
        table.writes.clear()
        for each in chunk:
            rows.fold(each, registry.agent_of(each), registry.evolve_agent)
        rows.write(table)
        assert set(table.writes.values()) <= {1}, "a changed row is written once per chunk"
        assert table == rows.rows
    assert stable(dict(table)) == stable(dict(registry.evolve_all(registry.INITIAL, EVENTS).agents))


def test_the_churn_expires_rows_so_a_chunk_deletes_some():
    assert list(registry.evolve_all(registry.INITIAL, EVENTS).agents) == ["newcomer"]
