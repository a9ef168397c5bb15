"""Slot allocation: each agent of a region gets an inbox partition of its own, from the region's share, for good."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.coordinator import PROJECTION
from swarmlog.coordinator.commands import Decision, Receive
from swarmlog.coordinator.decide import decide
from swarmlog.coordinator.state import Config, State, initial
from swarmlog.envelope import stamp
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentRegistered, SlotAllocated, SlotRequested

REGIONS = ("region-0", "region-1", "region-2")
ids = itertools.count()


def config(region: str = "region-1", partitions: int = 12) -> Config:
    return Config(region=region, regions=REGIONS, inbox_partitions=partitions)


def request(agent_id: str, region: str = "region-1") -> SlotRequested:
    return stamp(SlotRequested, producer="fleet:h", event_id=f"r{next(ids)}", agent_id=agent_id, region=region)


def step(state: State, event: Event) -> tuple[State, tuple[Event, ...]]:
    decision = decide(Receive(event, 1_000), state)
    assert isinstance(decision, Decision)
    return (decision.state or state), decision.events


def allocate(state: State, *agents: str) -> tuple[State, dict[str, int]]:
    found = {}
    for agent_id in agents:
        state, events = step(state, request(agent_id))
        for event in events:
            assert isinstance(event, SlotAllocated)
            found[event.agent_id] = event.slot
    return state, found


def test_agents_get_distinct_slots_from_the_regions_share_and_nothing_when_it_is_full():
    _, found = allocate(initial(config()), "a", "b", "c", "d", "e")
    assert found == {"a": 1, "b": 4, "c": 7, "d": 10}  # region-1 of 3 holds 1, 4, 7, 10 of 12
    assert "e" not in found


def test_asking_again_answers_with_the_same_slot_and_replay_folds_the_same_state():
    state, first = allocate(initial(config()), "a", "b")
    state, again = allocate(state, "a")
    assert again == {"a": first["a"]}
    assert state.slots == {"a": 1, "b": 4}


def test_an_operators_explicit_slot_is_never_allocated_to_another_agent():
    state = initial(config())
    registered = stamp(
        AgentRegistered,
        producer="agent:pinned",
        agent_id="pinned",
        capabilities=[],
        model="m",
        brain="scripted",
        node="n",
        region="region-1",
        slot=1,
    )
    state, _ = step(state, registered)
    state, found = allocate(state, "a")
    assert found == {"a": 4}


def test_another_regions_requests_are_not_this_coordinators():
    _, found = allocate(initial(config()), "x")
    _, events = step(initial(config()), request("y", region="region-0"))
    assert events == () and found == {"x": 1}


@given(st.lists(st.sampled_from("abcdefgh"), max_size=30), st.integers(3, 40))
def test_no_two_agents_ever_share_a_slot_and_the_fold_of_the_journal_agrees(agents, partitions):
    state = initial(config(partitions=partitions))
    journal: list[Event] = []
    for agent_id in agents:
        state, events = step(state, request(agent_id))
        journal.extend(events)
    assert len(set(state.slots.values())) == len(state.slots)
    assert all(slot % len(REGIONS) == 1 and slot < partitions for slot in state.slots.values())
    assert PROJECTION.fold(initial(config(partitions=partitions)), journal).slots == state.slots


def test_a_redelivered_request_emits_nothing_and_a_new_one_is_answered_again():
    state = initial(config())
    asked = request("a")
    state, first = step(state, asked)
    _, again = step(state, asked)
    _, anew = step(state, request("a"))
    assert (len(first), again, [e.slot for e in anew]) == (1, (), [first[0].slot])
