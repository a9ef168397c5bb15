"""The Redis memory plan: one key per experience with an absolute expiry, and batches cut by event time."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st
from streams_builders import event, task_started

from swarmlog.streams.memory import MemoryWrite, WriteBatcher, plan_write


def recorded(experience: str, at_ms: int, ttl_s: int = 3600) -> object:
    return event(
        "ExperienceRecorded",
        at_ms,
        f"exp-{experience}",
        experience_id=experience,
        agent_id="a",
        node="n1",
        kind="insight",
        content="tests first",
        embedding=[0.5, -0.25],
        ttl_s=ttl_s,
        mission_id="m1",
    )


def test_an_experience_becomes_one_key_with_its_fields_and_an_expiry_from_its_own_time():
    write = plan_write(recorded("x1", 10_000, ttl_s=60), now_ms=20_000)
    assert (write.key, write.expire_at_ms) == ("experience:x1", 70_000)
    assert json.loads(write.value) == {
        "content": "tests first",
        "kind": "insight",
        "agent": "a",
        "node": "n1",
        "embedding": [0.5, -0.25],
        "mission": "m1",
    }


def test_a_replayed_experience_that_already_expired_is_skipped():
    assert plan_write(recorded("x1", 10_000, ttl_s=60), now_ms=70_000) is None
    assert plan_write(task_started(0), now_ms=0) is None


def test_writes_of_one_interval_flush_together_when_a_later_interval_starts_or_a_tick_ends_it():
    first, second, third = (MemoryWrite(f"experience:{n}", "{}", 10**9) for n in "123")
    batcher, flushed = WriteBatcher().add(first, 1000)
    batcher, flushed_too = batcher.add(second, 1499)
    assert flushed == flushed_too == ()
    batcher, flushed = batcher.add(third, 1500)
    assert flushed == (first, second)
    assert batcher.tick(1999) == (batcher, ())
    assert batcher.tick(2000)[1] == (third,)


def test_a_key_written_twice_in_one_batch_is_written_once():
    write = MemoryWrite("experience:1", "{}", 10**9)
    batcher = WriteBatcher().add(write, 0)[0].add(write, 1)[0]
    assert batcher.flush() == (WriteBatcher(), (write,))


@given(st.lists(st.integers(0, 5000), max_size=30))
def test_batching_loses_nothing_and_depends_only_on_event_times(times):
    ordered = sorted(times)

    def batches() -> list:
        batcher, out = WriteBatcher(), []
        for index, at_ms in enumerate(ordered):
            batcher, flushed = batcher.add(MemoryWrite(f"experience:{index}", "{}", 10**9), at_ms)
            out += [flushed] if flushed else []
        return [*out, batcher.flush()[1]]

    assert batches() == batches()
    assert sum(len(batch) for batch in batches()) == len(times)
    for batch in batches():
        assert len({ordered[int(write.key.split(":")[1])] // 500 for write in batch}) <= 1
