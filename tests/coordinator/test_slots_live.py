"""A released inbox slot on a real broker (#12): an agent deregisters, its coordinator (goodbye retention 0) writes
SlotReleased to swarm.agents.slots under its key, and the next agent that asks gets the slot."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from swarmlog.actors.slots import allocated
from swarmlog.coordinator.shell.service import CoordinatorService
from swarmlog.envelope import stamp
from swarmlog.kafka.collecting import Collector
from swarmlog.kafka.producer import EventProducer
from swarmlog.schemas.records import AgentDeregistered, AgentRegistered, SlotAllocated, SlotReleased, SlotRequested
from swarmlog.settings import Settings
from swarmlog.topics import REGISTRY, SLOTS


async def test_an_agent_that_deregisters_gives_its_slot_to_the_next_agent(
    own_settings: Settings, tmp_path: Path
) -> None:
    settings = own_settings
    async with (
        EventProducer(settings, client_id="test-slot-release") as producer,
        Collector(settings, SLOTS, start="end", keep=lambda e: isinstance(e, SlotAllocated | SlotReleased)) as answers,
        CoordinatorService(settings, "region-0", data_dir=tmp_path, retain_goodbye_slot_ms=0),
    ):
        await _ask(producer, "leaving")
        await answers.wait_for(lambda: answers.named(SlotAllocated, agent_id="leaving"), timeout_s=60)
        [first] = answers.named(SlotAllocated, agent_id="leaving")
        await _ask(producer, "staying")
        await answers.wait_for(lambda: answers.named(SlotAllocated, agent_id="staying"), timeout_s=60)
        registered = stamp(
            AgentRegistered,
            producer="agent:leaving",
            agent_id="leaving",
            capabilities=[],
            model="m",
            brain="scripted",
            node="n",
            region="region-0",
            slot=first.slot,
        )
        await producer.send(REGISTRY, registered, key="leaving")
        bye = stamp(AgentDeregistered, producer="agent:leaving", agent_id="leaving", reason="done for good")
        await producer.send(REGISTRY, bye, key="leaving")
        await answers.wait_for(lambda: answers.named(SlotReleased, agent_id="leaving"), timeout_s=60)
        [released] = answers.named(SlotReleased, agent_id="leaving")
        assert (released.slot, released.region) == (first.slot, "region-0")
        assert released.reason.startswith("deregistered "), released.reason  # on the first tick: no retention here

        await _ask(producer, "newcomer")
        await answers.wait_for(lambda: answers.named(SlotAllocated, agent_id="newcomer"), timeout_s=60)
        [taken] = answers.named(SlotAllocated, agent_id="newcomer")
        assert taken.slot == first.slot  # the lowest free slot of the share: the one given back
        [staying] = answers.named(SlotAllocated, agent_id="staying")
        assert staying.slot != taken.slot

    # A host reading the topic after the release no longer holds the leaving agent's slot, so it asks again.
    held: Mapping[str, int] = {}
    regions = {"leaving": "region-0", "newcomer": "region-0"}
    for event in answers.events:
        held = allocated(held, event, regions)
    assert held == {"newcomer": first.slot}


async def _ask(producer: EventProducer, agent_id: str) -> None:
    """A SlotRequested to region-0, as a fleet host asks."""
    event = stamp(SlotRequested, producer="test", agent_id=agent_id, region="region-0", host="test")
    await producer.send(SLOTS, event, key=agent_id)
