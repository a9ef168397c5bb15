"""The top level's pure core: a mission split across regions by capacity, its shares followed, moved and completed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.coordinator import top
from swarmlog.coordinator.announcements import Announcement
from swarmlog.coordinator.split import components
from swarmlog.coordinator.top import PROJECTION, Config, Decision, Receive, Tick, decide
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import (
    FinalSharePlaced,
    MissionCompleted,
    MissionFailed,
    MissionRejected,
    MissionSplit,
    MissionSubmitted,
    ShareCompleted,
    ShareMoved,
    TaskSpec,
)

from .harness import T0, Swarm, make, named, task

INTERVAL_MS = 2_000


class Top:
    """The top level driven as its shell drives it, with the regions' announcements as the shell has read them."""

    def __init__(self, config: Config | None = None) -> None:
        self.state = PROJECTION.initial(config or Config())
        self.journal: list[Event] = []
        self.sent: list[MissionSubmitted] = []
        self.regions: dict[str, Announcement] = {}
        self.now_ms = T0
        self._sequence = 0

    def announce(self, region: str, idle: int, *, serving: bool = True, agents: int | None = None) -> None:
        """The region's coordinator announces itself now."""
        agents = idle if agents is None else agents
        self.regions[region] = Announcement(region, f"{region}-c", serving, self.now_ms, INTERVAL_MS, agents, idle, 0)

    def input(self, kind: type[Event], **fields: Any) -> Event:
        """An input as another process wrote it."""
        self._sequence += 1
        return make(kind, event_id=f"in-{self._sequence}", occurred_at=self.now_ms, **fields)

    def receive(self, event: Event) -> list[Event]:
        """Decide on an input (a redelivery when it was received before)."""
        return self.apply(Receive(event, self.now_ms, dict(self.regions)))

    def tick(self, elapsed_ms: int = 0) -> list[Event]:
        """Let time pass and decide a tick."""
        self.now_ms += elapsed_ms
        self._sequence += 1
        return self.apply(Tick(self.now_ms, f"tick-{self._sequence}", dict(self.regions)))

    def apply(self, command: Receive | Tick) -> list[Event]:
        """Decide, fold, journal, and collect the sub-missions the events place."""
        return self.apply_decision(decide(command, self.state))

    def apply_decision(self, decision: Decision) -> list[Event]:
        """Fold and journal a decision, and collect the sub-missions its events place."""
        assert isinstance(decision, Decision)
        for event in decision.events:
            self.state = PROJECTION.evolve(self.state, event)
        assert decision.state in (None, self.state)
        self.journal.extend(decision.events)
        self.sent.extend(top.submissions(decision.events, self.state))
        return list(decision.events)

    def submit(self, mission_id: str, tasks: Sequence[dict[str, Any]], **fields: Any) -> list[Event]:
        """A client submits a mission to the top level."""
        submitted = self.input(
            MissionSubmitted, mission_id=mission_id, title=mission_id, region="top", tasks=list(tasks), **fields
        )
        return self.receive(submitted)

    def end(self, sub_mission_id: str, *, success: bool = True, outputs: Sequence[str] = ("ok",)) -> list[Event]:
        """A region's journal says a sub-mission ended."""
        counters = {"latency_ms": 5, "agent_count": 1, "tasks_completed": 1, "tasks_failed": 0, "tokens_used": 7}
        if success:
            ended = self.input(
                MissionCompleted, mission_id=sub_mission_id, success=True, outputs=list(outputs), **counters
            )
        else:
            ended = self.input(MissionFailed, mission_id=sub_mission_id, reason="no agent", outputs=[], **counters)
        return self.receive(ended)

    def split(self) -> MissionSplit:
        """The one MissionSplit of the journal."""
        [split] = named(self.journal, MissionSplit)
        return split


def independent(count: int) -> list[dict[str, Any]]:
    return [task(f"t{index}", "code") for index in range(count)]


def shares(split: MissionSplit) -> dict[str, tuple[str, int]]:
    """Region and task count by share id."""
    return {share.share_id: (share.region, len(share.task_ids)) for share in split.shares}


def test_a_mission_is_split_over_the_served_regions_by_their_idle_agents():
    swarm = Top()
    swarm.announce("region-0", idle=6)
    swarm.announce("region-1", idle=2)

    swarm.submit("m", independent(40))

    assert shares(swarm.split()) == {"s0": ("region-0", 30), "s1": ("region-1", 10)}
    assert [share.idle_agents for share in swarm.split().shares] == [6, 2]
    assert [(sent.mission_id, sent.region, len(sent.tasks)) for sent in swarm.sent] == [
        ("m/s0", "region-0", 30),
        ("m/s1", "region-1", 10),
    ]
    assert all(sent.final_action is None and sent.producer == "top" for sent in swarm.sent)


def test_tasks_linked_by_dependencies_stay_in_one_share():
    swarm = Top()
    swarm.announce("region-0", idle=4)
    swarm.announce("region-1", idle=4)
    chains = [task(f"c{c}-{i}", "code", depends_on=[f"c{c}-{i - 1}"] if i else []) for c in range(4) for i in range(5)]

    swarm.submit("m", chains)

    assert shares(swarm.split()) == {"s0": ("region-0", 10), "s1": ("region-1", 10)}
    for share in swarm.split().shares:
        assert len({task_id.split("-")[0] for task_id in share.task_ids}) == 2  # two whole chains each
    for sent in swarm.sent:  # every dependency of a sub-mission's task is in that sub-mission
        ids = {spec.task_id for spec in sent.tasks}
        assert all(set(spec.depends_on) <= ids for spec in sent.tasks)


def test_regions_not_served_get_nothing():
    swarm = Top()
    swarm.announce("region-0", idle=3)
    swarm.announce("region-1", idle=9, serving=False)  # stopped cleanly
    swarm.announce("region-2", idle=9)
    swarm.now_ms += 3 * INTERVAL_MS + 1
    swarm.announce("region-0", idle=3)  # region-2 went silent
    swarm.announce("top", idle=5)  # the top level announces itself, and is no region

    swarm.submit("m", independent(10))

    assert shares(swarm.split()) == {"s0": ("region-0", 10)}


def test_a_redelivered_input_emits_nothing():
    swarm = Top()
    swarm.announce("region-0", idle=2)
    submitted = swarm.input(MissionSubmitted, mission_id="m", title="m", region="top", tasks=independent(3))
    assert swarm.receive(submitted)
    ended = swarm.input(
        MissionCompleted,
        mission_id="m/s0",
        success=True,
        outputs=["x"],
        latency_ms=1,
        agent_count=1,
        tasks_completed=3,
        tasks_failed=0,
    )
    assert named(swarm.receive(ended), MissionCompleted)

    assert swarm.receive(submitted) == []
    assert swarm.receive(ended) == []
    assert swarm.tick(1_000) == []


def test_a_regional_mission_is_not_the_top_s_and_a_top_mission_is_no_region_s():
    swarm = Top()
    swarm.announce("region-0", idle=2)
    regional = swarm.input(MissionSubmitted, mission_id="r", title="r", region="region-0", tasks=independent(2))
    assert swarm.receive(regional) == []

    regions = ("region-0", "region-1")
    for region in regions:
        coordinator = Swarm(region, regions)
        coordinator.register(f"{region}-a", "code")
        assert coordinator.submit("m", independent(2), region="top") == []
        assert not coordinator.state.known("m")


def test_a_mission_completes_once_every_share_has_and_its_final_action_ran():
    swarm = Top()
    swarm.announce("region-0", idle=2)
    swarm.announce("region-1", idle=5)
    swarm.submit("m", independent(14), final_action={"prompt": "sum up", "required_capabilities": ["writing"]})
    assert shares(swarm.split()) == {"s0": ("region-0", 4), "s1": ("region-1", 10)}

    assert named(swarm.end("m/s0", outputs=["four"]), ShareCompleted)
    assert not named(swarm.journal, FinalSharePlaced)
    swarm.announce("region-0", idle=7)
    [placed] = named(swarm.end("m/s1", outputs=["ten"]), FinalSharePlaced)

    assert (placed.region, placed.idle_agents) == ("region-0", 7)
    assert placed.prompt == "sum up\n\nThe shares' results:\n- s0: four\n- s1: ten"
    [final] = swarm.sent[-1:]
    assert (final.mission_id, final.region, final.final_action) == ("m/final", "region-0", None)
    assert [(spec.task_id, spec.required_capabilities) for spec in final.tasks] == [
        ("final", ["decision_making", "writing"])
    ]
    [done] = named(swarm.end("m/final", outputs=["the answer"]), MissionCompleted)
    assert (done.mission_id, done.success, done.outputs, done.tasks_completed, done.tokens_used) == (
        "m",
        True,
        ["the answer"],
        3,
        21,
    )
    assert done.producer == "top" and done.latency_ms == 0


def test_without_a_final_action_the_outputs_are_the_shares_in_order():
    swarm = Top()
    swarm.announce("region-0", idle=1)
    swarm.announce("region-1", idle=1)
    swarm.submit("m", independent(4))
    swarm.end("m/s1", outputs=["b"])
    [done] = named(swarm.end("m/s0", outputs=["a"]), MissionCompleted)

    assert done.outputs == ["a", "b"]


def test_a_failed_share_fails_the_mission_and_later_results_change_nothing():
    swarm = Top()
    swarm.announce("region-0", idle=1)
    swarm.announce("region-1", idle=1)
    swarm.submit("m", independent(4))

    [failed] = named(swarm.end("m/s0", success=False), MissionFailed)

    assert failed.reason == "share s0 failed in region-0: no agent"
    assert swarm.end("m/s1") == []


def test_the_share_of_a_region_that_stops_answering_moves_and_its_late_result_is_ignored():
    swarm = Top(Config(move_after_ms=10_000))
    swarm.announce("region-0", idle=4)
    swarm.announce("region-1", idle=4)
    swarm.submit("m", independent(8))

    silent_from = swarm.now_ms + 3 * INTERVAL_MS
    for _ in range(7):  # 14 s: region-1 keeps announcing, region-0 is silent
        swarm.tick(INTERVAL_MS)
        swarm.announce("region-1", idle=4)
    assert named(swarm.journal, ShareMoved) == []
    swarm.now_ms = silent_from + 10_000
    swarm.announce("region-1", idle=4)
    [moved] = swarm.tick()

    assert isinstance(moved, ShareMoved)
    assert (moved.share_id, moved.attempt, moved.from_region, moved.region) == ("s0", 1, "region-0", "region-1")
    assert moved.reason == f"region-0 has not been served since {silent_from} ms"
    assert [(sent.mission_id, sent.region, len(sent.tasks)) for sent in swarm.sent[-1:]] == [("m/s0/1", "region-1", 4)]
    assert swarm.end("m/s0", outputs=["late"]) == []  # the first attempt answers after all: ignored
    [recorded] = named(swarm.end("m/s0/1", outputs=["moved"]), ShareCompleted)
    assert (recorded.sub_mission_id, recorded.region) == ("m/s0/1", "region-1")
    [done] = named(swarm.end("m/s1", outputs=["stayed"]), MissionCompleted)
    assert done.outputs == ["moved", "stayed"]


def test_a_share_stays_while_no_other_region_is_served():
    swarm = Top(Config(move_after_ms=1_000))
    swarm.announce("region-0", idle=4)
    swarm.submit("m", independent(2))
    swarm.now_ms += 60_000
    swarm.announce("top", idle=0)  # the top level's own announcement is no region to move a share to

    assert swarm.tick() == []


def test_with_no_region_served_the_mission_waits_in_one_share_placed_when_a_region_answers():
    swarm = Top()
    swarm.submit("m", independent(3))
    assert shares(swarm.split()) == {"s0": ("", 3)}
    assert swarm.sent == []
    assert swarm.tick(1_000) == []

    swarm.announce("region-1", idle=2)
    [placed] = swarm.tick(250)

    assert isinstance(placed, ShareMoved)
    assert (placed.attempt, placed.from_region, placed.region) == (0, "", "region-1")
    assert [(sent.mission_id, sent.region) for sent in swarm.sent] == [("m/s0", "region-1")]


def test_a_mission_the_top_level_cannot_split_is_rejected_once():
    swarm = Top()
    [rejected] = swarm.submit("m", [], planning={"prompt": "plan it"})
    assert isinstance(rejected, MissionRejected)
    assert "planning step" in rejected.reason
    assert swarm.submit("m", [], planning={"prompt": "plan it"}) == []
    assert named(swarm.submit("n", [task("a", depends_on=["zz"])]), MissionRejected)
    [passing] = named(swarm.submit("p", [task("a")], pass_replicas=True), MissionRejected)
    assert "does not pass replicas' outputs" in passing.reason


def test_a_submission_whose_decision_cannot_be_written_is_rejected_once_and_nothing_else_is_refused():
    swarm = Top()
    swarm.announce("region-0", idle=2)
    submitted = swarm.input(MissionSubmitted, mission_id="m", title="m", region="top", tasks=independent(3))
    command = Receive(submitted, swarm.now_ms, dict(swarm.regions))
    refusal = top.refuse(command, swarm.state, "too large")
    assert refusal is not None
    [rejected] = refusal.events
    assert isinstance(rejected, MissionRejected)
    assert (rejected.mission_id, rejected.reason, rejected.causation_id) == ("m", "too large", submitted.event_id)
    swarm.apply_decision(refusal)
    assert swarm.receive(submitted) == [] and swarm.sent == []
    ended = swarm.input(
        MissionCompleted,
        mission_id="m/region-0",
        success=True,
        outputs=[],
        latency_ms=1,
        agent_count=1,
        tasks_completed=1,
        tasks_failed=0,
        tokens_used=1,
    )
    assert top.refuse(Receive(ended, swarm.now_ms, dict(swarm.regions)), swarm.state, "too large") is None


def test_a_mission_past_its_deadline_fails_on_a_tick():
    swarm = Top()
    swarm.announce("region-0", idle=1)
    swarm.submit("m", independent(2), deadline_ms=5_000)
    assert swarm.sent[0].deadline_ms == 5_000
    swarm.tick(4_999)
    assert not named(swarm.journal, MissionFailed)

    [failed] = swarm.tick(1)

    assert isinstance(failed, MissionFailed) and failed.reason == f"deadline passed at {T0 + 5_000} ms"
    assert swarm.end("m/s0") == []


def test_the_recovered_state_is_the_live_one_and_re_sends_what_runs():
    swarm = Top(Config(move_after_ms=1_000))
    swarm.announce("region-0", idle=3)
    swarm.announce("region-1", idle=3)
    swarm.submit("a", independent(6), final_action={"prompt": "sum up"})
    swarm.submit("b", independent(4))
    swarm.end("a/s0")
    swarm.now_ms += 3 * INTERVAL_MS + 1_000
    swarm.announce("region-1", idle=3)
    swarm.tick()  # region-0 is silent: b/s0 moves (a/s0 has completed)
    swarm.end("a/s1")

    replayed = PROJECTION.rebuild(Config(move_after_ms=1_000), swarm.journal)

    assert replayed == swarm.state
    assert sorted(sent.mission_id for sent in top.pending(replayed)) == ["a/final", "b/s0/1", "b/s1"]


@given(
    st.lists(st.integers(min_value=0, max_value=12), min_size=1, max_size=30),
    st.dictionaries(st.sampled_from(["r0", "r1", "r2", "r3"]), st.integers(min_value=0, max_value=8), min_size=1),
)
def test_every_task_lands_in_exactly_one_share_with_its_whole_component_in_a_served_region(
    links: list[int], idle: Mapping[str, int]
):
    tasks = [task(f"t{index}", depends_on=[f"t{link}"] if link < index else []) for index, link in enumerate(links)]
    swarm = Top()
    for region, count in idle.items():
        swarm.announce(region, idle=count)

    swarm.submit("m", tasks)

    placed = {task_id: share.region for share in swarm.split().shares for task_id in share.task_ids}
    assert sorted(placed) == sorted(t["task_id"] for t in tasks)
    assert set(placed.values()) <= {region for region, count in idle.items() if count} or not any(idle.values())
    for group in components([TaskSpec(t["task_id"], t["prompt"], depends_on=t["depends_on"]) for t in tasks]):
        assert len({placed[task_id] for task_id in group}) == 1
    replayed = PROJECTION.rebuild(Config(), swarm.journal)
    assert replayed == swarm.state
    assert {sent.mission_id for sent in swarm.sent} == set(replayed.running)
