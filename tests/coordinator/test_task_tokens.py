"""A task's max_tokens, given/when/then: from the mission's spec to each of its assignments, bounded, and what the
agent makes of it."""

import json

import pytest

from swarmlog.actors.actions import ACTION_OVERHEAD_TOKENS
from swarmlog.actors.brains import LLAMACPP_CONTEXT, PROMPT_ROOM, task_tokens
from swarmlog.actors.domain import Order
from swarmlog.client import MissionInvalid, validate_mission
from swarmlog.coordinator.plan import MAX_TASK_TOKENS, MIN_TASK_TOKENS
from swarmlog.schemas.codec import encode
from swarmlog.schemas.records import MissionAccepted, MissionFailed, MissionRejected, PlanAdopted, TaskAssigned

from .harness import Swarm, named, task


def test_the_smallest_task_budget_leaves_room_for_an_action_s_content():
    assert MIN_TASK_TOKENS == ACTION_OVERHEAD_TOKENS + 1


def test_a_task_s_max_tokens_goes_with_every_replica_and_a_task_without_one_leaves_it_to_the_agent():
    swarm = Swarm()
    for agent in ("a1", "a2", "a3"):
        swarm.register(agent, "code")
    events = swarm.submit("m", [task("big", "code", replicas=2) | {"max_tokens": 4096}, task("small", "code")])
    [accepted] = named(events, MissionAccepted)
    assert {t.task_id: t.max_tokens for t in accepted.tasks} == {"big": 4096, "small": None}
    assigned = {(e.task_id, e.replica): e.max_tokens for e in named(events, TaskAssigned)}
    assert assigned == {("big", 0): 4096, ("big", 1): 4096, ("small", 0): None}
    for event in named(events, TaskAssigned):
        encode(event)
        assert Order.of(event).max_tokens == event.max_tokens
    assert swarm.replay() == swarm.state


@pytest.mark.parametrize("tokens", [0, -5, ACTION_OVERHEAD_TOKENS, MAX_TASK_TOKENS + 1])
def test_a_task_s_max_tokens_out_of_bounds_rejects_the_mission_and_the_client_refuses_it(tokens):
    [rejected] = Swarm().submit("m", [task("a") | {"max_tokens": tokens}])
    assert isinstance(rejected, MissionRejected)
    assert f"max_tokens {tokens}; give {MIN_TASK_TOKENS} to {MAX_TASK_TOKENS}" in rejected.reason
    with pytest.raises(MissionInvalid, match=f"max_tokens {tokens}"):
        validate_mission({"title": "t", "tasks": [task("a") | {"max_tokens": tokens}]})


def test_the_bounds_themselves_are_accepted():
    for tokens in (MIN_TASK_TOKENS, MAX_TASK_TOKENS):
        assert validate_mission({"title": "t", "tasks": [task("a") | {"max_tokens": tokens}]}).tasks[0].max_tokens


def test_a_planner_may_give_a_task_max_tokens_and_a_bad_one_fails_the_plan():
    swarm = Swarm()
    swarm.register("p", "code")
    swarm.submit("m", planning={"prompt": "plan it", "required_capabilities": ["code"]})
    [planner] = swarm.running()
    events = swarm.complete(planner, json.dumps([{"task_id": "a", "prompt": "A", "max_tokens": 512}]))
    [adopted] = named(events, PlanAdopted)
    assert adopted.tasks[0].max_tokens == 512
    assert named(events, TaskAssigned)[0].max_tokens == 512
    swarm = Swarm()
    swarm.register("p", "code")
    swarm.submit("n", planning={"prompt": "plan it", "required_capabilities": ["code"]})
    bad = swarm.complete(swarm.running()[0], json.dumps([{"task_id": "a", "prompt": "A", "max_tokens": 0}]))
    [failed] = named(bad, MissionFailed)
    assert failed.reason.startswith("invalid plan: task 'a' has max_tokens 0")


def test_the_agent_takes_the_task_s_budget_else_its_own_held_to_its_brain_s_context():
    assert task_tokens("vllm", 2048, None) == 2048
    assert task_tokens("vllm", 2048, 8192) == 8192
    assert task_tokens("scripted", 428, 1000) == 1000
    assert task_tokens("llamacpp", 428, 200) == 200
    assert task_tokens("llamacpp", 428, 100_000) == LLAMACPP_CONTEXT - PROMPT_ROOM
