"""Slot allocation: each agent of a region gets an inbox partition of its own, from the region's share, until it is
released a retention after the agent left (#12)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.actors.slots import allocated
from swarmlog.coordinator import PROJECTION
from swarmlog.coordinator.commands import Decision, Receive, Tick
from swarmlog.coordinator.decide import decide
from swarmlog.coordinator.state import Config, State, initial
from swarmlog.envelope import stamp
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    AgentDeclaredDead,
    AgentDeregistered,
    AgentRegistered,
    SlotAllocated,
    SlotReleased,
    SlotRequested,
)

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


# Release (#12): a goodbye frees the slot at once, a death after the retention; a freed slot is allocated again.

RETAIN, GOODBYE = 50_000, 20_000


def churn(partitions: int = 12) -> Config:
    return Config(
        region="region-1",
        regions=REGIONS,
        inbox_partitions=partitions,
        retain_slot_ms=RETAIN,
        retain_goodbye_slot_ms=GOODBYE,
    )


def released(events: tuple[Event, ...]) -> list[tuple[str, int]]:
    return [(event.agent_id, event.slot) for event in events if isinstance(event, SlotReleased)]


def registered(agent_id: str, slot: int) -> AgentRegistered:
    return stamp(
        AgentRegistered,
        producer=f"agent:{agent_id}",
        agent_id=agent_id,
        capabilities=[],
        model="m",
        brain="scripted",
        node="n",
        region="region-1",
        slot=slot,
    )


def deregistered(agent_id: str) -> AgentDeregistered:
    return stamp(AgentDeregistered, producer=f"agent:{agent_id}", agent_id=agent_id, reason="bye")


def dead(agent_id: str) -> AgentDeclaredDead:
    return stamp(
        AgentDeclaredDead,
        producer="streams",
        agent_id=agent_id,
        registration_id="reg",
        last_heartbeat_at=0,
        timeout_ms=5_000,
    )


def at(state: State, command: Receive | Tick) -> tuple[State, tuple[Event, ...]]:
    decision = decide(command, state)
    assert isinstance(decision, Decision)
    return (decision.state or state), decision.events


def enlisted(state: State, agent_id: str) -> State:
    state, found = allocate(state, agent_id)
    state, _ = step(state, registered(agent_id, found[agent_id]))
    return state


def left(state: State, agent_id: str) -> State:
    """The state after the agent deregistered at 1 s and the goodbye retention passed (a tick then)."""
    state, events = step(state, deregistered(agent_id))
    assert released(events) == []
    state, _ = at(state, Tick(1_000 + GOODBYE, f"left-{agent_id}"))
    return state


def test_an_agent_that_deregisters_releases_its_slot_after_the_goodbye_retention_and_a_new_agent_gets_it():
    state = enlisted(enlisted(initial(churn()), "a"), "b")
    state, events = step(state, deregistered("a"))
    assert released(events) == [] and state.slots == {"a": 1, "b": 4}
    _, early = at(state, Tick(1_000 + GOODBYE - 1, "t1"))
    assert released(early) == []
    state, due = at(state, Tick(1_000 + GOODBYE, "t2"))
    [release] = [event for event in due if isinstance(event, SlotReleased)]
    assert (release.agent_id, release.region, release.slot) == ("a", "region-1", 1)
    assert release.reason == f"deregistered {GOODBYE} ms ago"
    assert "a" not in state.slots
    _, found = allocate(state, "c")
    assert found == {"c": 1}


def test_an_agent_restarted_within_the_goodbye_retention_keeps_its_slot():
    state = enlisted(initial(churn()), "a")
    state, _ = step(state, deregistered("a"))
    state, _ = at(state, Receive(registered("a", 1), 5_000))
    _, due = at(state, Tick(1_000 + 2 * RETAIN, "t"))
    assert due == () and state.slots == {"a": 1}


def test_a_dead_agent_keeps_its_slot_for_the_retention_then_releases_it():
    state = enlisted(initial(churn(partitions=6)), "a")
    state, _ = at(state, Receive(dead("a"), 1_000))
    state, found = allocate(state, "b")
    assert found == {"b": 4}  # region-1 of 3 holds 1 and 4 of 6; a's slot is still its own
    state, early = at(state, Tick(1_000 + RETAIN - 1, "t1"))
    assert not any(isinstance(event, SlotReleased) for event in early)
    state, due = at(state, Tick(1_000 + RETAIN, "t2"))
    assert [(e.agent_id, e.slot) for e in due if isinstance(e, SlotReleased)] == [("a", 1)]
    _, again = at(state, Tick(1_000 + 2 * RETAIN, "t3"))
    assert not any(isinstance(event, SlotReleased) for event in again)
    _, found = allocate(state, "c")
    assert found == {"c": 1}


def test_an_agent_back_before_the_retention_keeps_its_slot():
    state = enlisted(initial(churn(partitions=6)), "a")
    state, _ = at(state, Receive(dead("a"), 1_000))
    state, _ = at(state, Receive(registered("a", 1), 2_000))
    _, due = at(state, Tick(1_000 + 2 * RETAIN, "t"))
    assert due == () and state.slots == {"a": 1}


def test_a_released_agent_that_comes_back_asks_again_and_gets_a_free_slot():
    state = enlisted(enlisted(initial(churn(partitions=9)), "a"), "b")  # region-1's share of 9: 1, 4, 7
    state = left(state, "a")
    state, _ = allocate(state, "c")  # takes a's old slot
    state, found = allocate(state, "a")
    assert found == {"a": 7} and state.slots == {"b": 4, "c": 1, "a": 7}


def test_a_redelivered_request_after_the_release_is_not_answered():
    state = initial(churn())
    asked = request("a")
    state, _ = step(state, asked)
    state, _ = step(state, registered("a", 1))
    state = left(state, "a")
    assert "a" not in state.slots
    _, again = step(state, asked)
    assert again == ()


def test_an_explicit_slot_is_never_released_nor_allocated_while_its_agent_is_known():
    state, _ = step(initial(churn()), registered("pinned", 1))
    state = left(state, "pinned")
    _, found = allocate(state, "a")
    assert found == {"a": 4}


def test_a_host_forgets_a_released_slot_and_keeps_a_newer_allocation():
    regions = {"a": "region-1"}
    allocation = stamp(SlotAllocated, producer="c", agent_id="a", region="region-1", slot=4, partitions=12)
    release = stamp(SlotReleased, producer="c", agent_id="a", region="region-1", slot=4, reason="deregistered")
    held = allocated({}, allocation, regions)
    assert allocated(held, release, regions) == {}
    newer = allocated(
        held, stamp(SlotAllocated, producer="c", agent_id="a", region="region-1", slot=7, partitions=12), regions
    )
    assert allocated(newer, release, regions) == {"a": 7}  # an older slot's release does not take the newer one


ACTIONS = st.tuples(st.sampled_from(["register", "deregister", "die", "tick"]), st.sampled_from("abcdef"))


@given(st.lists(ACTIONS, max_size=40), st.integers(3, 20))
def test_no_two_live_agents_ever_share_a_slot_across_churn_and_replay_agrees(actions, partitions):
    cfg = churn(partitions)
    state = initial(cfg)
    journal: list[Event] = []
    now = 0
    for index, (action, agent_id) in enumerate(actions):
        now += 20_000
        if action == "register":
            state, events = at(state, Receive(request(agent_id), now))
            journal.extend(events)
            slot = state.slots.get(agent_id)
            if slot is not None:
                state, events = at(state, Receive(registered(agent_id, slot), now))
                journal.extend(events)
        else:
            command: Receive | Tick = Tick(now, f"tick-{index}")
            if action != "tick":
                command = Receive((deregistered if action == "deregister" else dead)(agent_id), now)
            state, events = at(state, command)
            journal.extend(events)
        # Every agent that may still read its slot: allocated and not released, or enlisted and not released.
        readers = {**{a.agent_id: a.slot for a in state.agents.values() if not a.released}, **state.slots}
        assert len(set(readers.values())) == len(readers), readers
        assert all(slot % len(REGIONS) == 1 and slot < partitions for slot in state.slots.values())
    assert PROJECTION.fold(initial(cfg), journal) == state
