"""Regions: each coordinator runs its own agents and the missions it owns, and nothing else."""

from swarmlog.coordinator.placement import owner
from swarmlog.schemas.records import MissionAccepted, MissionRejected, TaskAssigned

from .harness import Swarm, named, task

REGIONS = ("eu", "us")


def test_two_regions_do_not_interfere():
    eu, us = Swarm("eu", REGIONS), Swarm("us", REGIONS)
    unplaced = [f"m{i}" for i in range(8)]
    assert {owner(m, REGIONS) for m in unplaced} == set(REGIONS)
    for swarm in (eu, us):
        swarm.register("eu-1", "code", region="eu")
        swarm.register("us-1", "code", region="us")
        swarm.submit("pinned-us", [task("t", "code")], region="us")
        for mission_id in unplaced:
            swarm.submit(mission_id, [task("t", "code")])
    for swarm, region in ((eu, "eu"), (us, "us")):
        assert set(swarm.state.agents) == {f"{region}-1"}
        accepted = {e.mission_id for e in named(swarm.journal, MissionAccepted)}
        assert accepted == {m for m in unplaced if owner(m, REGIONS) == region} | (
            {"pinned-us"} if region == "us" else set()
        )
        assert {e.agent_id for e in named(swarm.journal, TaskAssigned)} == {f"{region}-1"}
        assert all(e.producer == f"coordinator:{region}" for e in swarm.journal)


def test_an_unknown_region_is_rejected_by_the_owner_only():
    eu, us = Swarm("eu", REGIONS), Swarm("us", REGIONS)
    events = [type(e) for swarm in (eu, us) for e in swarm.submit("m", [task("t")], region="mars")]
    assert events == [MissionRejected]
