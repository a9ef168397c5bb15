"""`swarmlog agent` restarted in every way that can strand work (scripted brain, real brokers): an empty or stale data
dir, a throttle that changed while it was down, kill -9 mid-step; and the records its readers cannot use."""

from __future__ import annotations

import json
import shutil
import signal

import pytest
from agent_harness import Log, publish_control, send_inbox, slot_of, spawner, stop_agent, task_assigned

from swarmlog import topics
from swarmlog.actors.domain import PROJECTION
from swarmlog.actors.shell.store import AgentStore, Checkpoint
from swarmlog.envelope import stamp
from swarmlog.kafka.reading import reader
from swarmlog.replay.components import component
from swarmlog.replay.fold import replay
from swarmlog.replay.source import read
from swarmlog.schemas.codec import encode
from swarmlog.schemas.records import (
    AgentDeregistered,
    AgentHeartbeat,
    AgentRegistered,
    BudgetExceeded,
    BudgetRestored,
    DeadLetterRecorded,
    DrainRequested,
    GroundTruthUpdated,
    TaskCompleted,
    TaskFailed,
    TaskStarted,
    TaskStepTaken,
    TokensUsed,
    VoteCast,
    VoteRequested,
)
from swarmlog.settings import Settings

TOPICS = (topics.TASK_EVENTS, topics.REGISTRY, topics.HEARTBEATS, topics.USAGE, topics.DEAD_LETTERS)
SCRIPTED = ("--brain", "scripted")


@pytest.fixture
def spawn(settings, agent_id, tmp_path):
    """Starts the test's agent (again, after a stop or a kill) with the scripted brain; kills what is left at the end."""
    yield from spawner(settings, agent_id, slot_of(settings, agent_id), tmp_path, SCRIPTED)


async def registered(log: Log, agent_id: str, times: int) -> None:
    await log.wait_for(lambda: len(log.named(AgentRegistered, agent_id=agent_id)) >= times, timeout_s=60)


def closed(log: Log, mission: str):
    return log.named(TaskCompleted, mission_id=mission) + log.named(TaskFailed, mission_id=mission)


async def inbox_end(settings: Settings, slot: int) -> int:
    from aiokafka import TopicPartition

    consumer = reader(settings, "test-ends", False)
    await consumer.start()
    try:
        tp = TopicPartition(topics.INBOX, slot)
        return (await consumer.end_offsets([tp]))[tp]
    finally:
        await consumer.stop()


def edit_checkpoint(tmp_path, agent_id: str, **changes) -> None:
    """Rewrite fields of the agent's stored checkpoint, as a store left by another cluster would hold them."""
    import dataclasses

    store = AgentStore(tmp_path / agent_id)
    try:
        saved = store.load(agent_id)
        assert saved is not None
        store.save(dataclasses.replace(saved, **changes))
    finally:
        store.close()


async def test_a_task_assigned_before_the_first_start_is_done_on_an_empty_data_dir(settings, agent_id, spawn):
    slot = slot_of(settings, agent_id)
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
    await send_inbox(settings, slot, task)
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await log.wait_for(lambda: closed(log, task.mission_id), timeout_s=60)
        assert stop_agent(process) == 0
    assert len(log.named(TaskStarted, mission_id=task.mission_id)) == 1


async def test_a_wiped_data_dir_redoes_nothing_finished_and_takes_new_tasks(settings, agent_id, spawn, tmp_path):
    slot = slot_of(settings, agent_id)
    first = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        await send_inbox(settings, slot, first)
        await log.wait_for(lambda: closed(log, first.mission_id))
        assert stop_agent(process) == 0
        shutil.rmtree(tmp_path / agent_id)
        second = task_assigned(agent_id, slot, "Say ok again.", max_steps=1)
        await send_inbox(settings, slot, first, second)  # the first again: a coordinator's redelivery
        process = spawn()
        await log.wait_for(lambda: closed(log, second.mission_id))
        assert stop_agent(process) == 0
    assert len(log.named(TaskStarted, mission_id=first.mission_id)) == 1
    assert len(closed(log, first.mission_id)) == 1


async def test_a_checkpoint_past_the_inbox_end_is_stale_and_the_agent_reads_its_inbox_again(
    settings, agent_id, spawn, tmp_path
):
    slot = slot_of(settings, agent_id)
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        assert stop_agent(process) == 0
        edit_checkpoint(tmp_path, agent_id, inbox=await inbox_end(settings, slot) + 1_000)  # a longer, older log
        task = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
        await send_inbox(settings, slot, task)
        process = spawn()
        await log.wait_for(lambda: closed(log, task.mission_id), timeout_s=60)
        assert stop_agent(process) == 0
    # Only WARNING and above reach the log without a logging set-up (Python's last-resort handler), as here.
    warnings = [line for line in (tmp_path / f"{agent_id}.log").read_text().splitlines() if "stale" in line]
    assert len(warnings) == 1 and "past the end" in warnings[0] and "--bootstrap" in warnings[0], warnings


async def test_a_checkpoint_of_another_cluster_is_stale_even_where_its_positions_fit(
    settings, agent_id, spawn, tmp_path
):
    slot = slot_of(settings, agent_id)
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        assert stop_agent(process) == 0
        await send_inbox(settings, slot, task)
        # As if the previous cluster had held a record more than this one: the checkpoint is past the task.
        edit_checkpoint(tmp_path, agent_id, inbox=await inbox_end(settings, slot), cluster="another-cluster")
        process = spawn()
        await log.wait_for(lambda: closed(log, task.mission_id), timeout_s=60)
        assert stop_agent(process) == 0
    text = (tmp_path / f"{agent_id}.log").read_text()
    assert "another-cluster" in text and "stale" in text


def exceeded(agent_id: str):
    return stamp(
        BudgetExceeded, producer="streams", agent_id=agent_id, window_start=0, window_end=60_000, used=99, budget=1
    )


def restored(agent_id: str):
    return stamp(BudgetRestored, producer="streams", agent_id=agent_id, window_start=60_000)


async def test_a_budget_restored_while_the_agent_was_down_lets_it_work_after_a_restart(settings, agent_id, spawn):
    slot = slot_of(settings, agent_id)
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        await publish_control(settings, exceeded(agent_id))
        await log.wait_for(lambda: log.named(AgentHeartbeat, agent_id=agent_id, status="THROTTLED"))
        assert stop_agent(process) == 0
        await publish_control(settings, restored(agent_id))
        await send_inbox(settings, slot, task)
        process = spawn()
        await log.wait_for(lambda: closed(log, task.mission_id), timeout_s=60)
        assert stop_agent(process) == 0


@pytest.mark.parametrize("wiped", [False, True], ids=["kept", "wiped"])
async def test_a_budget_exceeded_while_the_agent_was_down_throttles_it_from_its_restart(
    settings, agent_id, spawn, tmp_path, wiped
):
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        assert stop_agent(process) == 0
        await publish_control(settings, exceeded(agent_id))
        if wiped:
            shutil.rmtree(tmp_path / agent_id)
        process = spawn()
        await registered(log, agent_id, 2)
        second = log.named(AgentRegistered, agent_id=agent_id)[1].event_id
        await log.wait_for(lambda: log.named(AgentHeartbeat, registration_id=second))
        assert stop_agent(process) == 0
    first_beat = min(log.named(AgentHeartbeat, registration_id=second), key=lambda e: e.sequence)
    assert first_beat.status == "THROTTLED"


def vote_requested(agent_id: str, slot: int) -> VoteRequested:
    """A ballot for the agent, as the coordinator would write it, open for good."""
    return stamp(
        VoteRequested,
        producer="coordinator:region-0",
        mission_id=f"m-vote-{agent_id}",
        ballot_id=f"b-{agent_id}",
        voter_agent_id=agent_id,
        slot=slot,
        deadline_at=2**41,
        candidates=[{"candidate_id": "c1", "agent_id": "x", "output": "4"}],
    )


@pytest.mark.parametrize("wiped", [False, True], ids=["older-checkpoint", "wiped"])
async def test_a_restarted_agent_recovers_the_state_replay_folds(settings, agent_id, spawn, tmp_path, wiped):
    """A vote and a budget exceeded recorded after the checkpoint the agent restarts from (an older one, as after a
    kill -9 before its next checkpoint, or none) are folded back in: its state is the fold replay makes of its topics."""
    slot = slot_of(settings, agent_id)
    task, ballot = task_assigned(agent_id, slot, "Say ok.", max_steps=1), vote_requested(agent_id, slot)
    data, older = tmp_path / agent_id, tmp_path / "older"
    async with Log(settings, *TOPICS, topics.VOTES) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: closed(log, task.mission_id))
        assert stop_agent(process) == 0
        shutil.copytree(data, older)
        process = spawn()
        await registered(log, agent_id, 2)
        await send_inbox(settings, slot, ballot, key=agent_id)
        await log.wait_for(lambda: log.named(VoteCast, voter_agent_id=agent_id))
        await publish_control(settings, exceeded(agent_id))
        await log.wait_for(lambda: log.named(AgentHeartbeat, agent_id=agent_id, status="THROTTLED"))
        process.send_signal(signal.SIGKILL)
        process.wait(10)
        shutil.rmtree(data)
        if not wiped:
            shutil.copytree(older, data)
        process = spawn()
        await registered(log, agent_id, 3)
        assert stop_agent(process) == 0  # throttled: it took no command, its state is the one recovery folded
    store = AgentStore(data)
    try:
        recovered = store.load(agent_id)
    finally:
        store.close()
    assert isinstance(recovered, Checkpoint)
    records = (await read(settings, PROJECTION.topics)).records
    assert recovered.state == replay(component("agent"), agent_id, settings.region_names, records).state
    assert recovered.state.throttled and ballot.ballot_id in recovered.state.ballots
    assert len(recovered.state.closed) == 1 and not recovered.state.started


async def test_a_step_retried_after_kill_9_counts_its_tokens_again(settings, agent_id, spawn, tmp_path):
    slot = slot_of(settings, agent_id)
    model = tmp_path / "slow.json"
    model.write_text(
        json.dumps(
            {
                "median_ms": 2_500,
                "script": [
                    json.dumps({"action": "recall", "content": "logs", "confidence": 1}),
                    json.dumps({"action": "answer", "content": "ok", "confidence": 1}),
                ],
            }
        )
    )
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=3)
    mission = task.mission_id
    async with Log(settings, *TOPICS) as log:
        process = spawn("--brain", "scripted", "--model", str(model))
        await registered(log, agent_id, 1)
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: log.named(TaskStepTaken, mission_id=mission))
        process.send_signal(signal.SIGKILL)  # during the second step's 2.5 s generation
        process.wait(10)
        killed_before_completion = not closed(log, mission)
        process = spawn("--brain", "scripted", "--model", str(model))
        await log.wait_for(lambda: closed(log, mission), timeout_s=60)
        assert stop_agent(process) == 0
    used = log.named(TokensUsed, mission_id=mission)
    assert killed_before_completion and len(used) == 3  # step 1, then steps 1 and 2 again
    assert len({e.generation_id for e in used}) == 3 and len({e.event_id for e in used}) == 3
    assert len(closed(log, mission)) == 1


def dead_letters(log: Log, agent_id: str, topic: str) -> list:
    return [e for e in log.named(DeadLetterRecorded, origin_topic=topic) if e.consumer == f"agent:{agent_id}"]


async def test_inbox_records_the_agent_cannot_use_are_dead_lettered_once_even_when_read_again(
    settings, agent_id, spawn, tmp_path
):
    slot = slot_of(settings, agent_id)
    stray = stamp(GroundTruthUpdated, producer="operator", document_id="x", version=1, content="not a command")
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        first = await send_inbox(settings, slot, raw=b"not an avro record", key=agent_id)
        await send_inbox(settings, slot, raw=encode(stray), key=agent_id)  # past the producer's catalog check
        await send_inbox(settings, slot, task)
        await log.wait_for(lambda: closed(log, task.mission_id))
        assert stop_agent(process) == 0
        shutil.rmtree(tmp_path / agent_id)  # the rebuilt agent reads its inbox from the start again
        second = task_assigned(agent_id, slot, "Say ok again.", max_steps=1)
        await send_inbox(settings, slot, second)
        process = spawn()
        await log.wait_for(lambda: closed(log, second.mission_id))
        assert stop_agent(process) == 0
    # the slot may hold other tests' keyless garbage before ours, which the agent reading it from the start handles too
    letters = [e for e in dead_letters(log, agent_id, "swarm.agents.inbox") if e.origin_offset >= (first or 0)]
    assert {e.payload for e in letters} >= {b"not an avro record"}
    assert any("GroundTruthUpdated" in e.reason for e in letters)
    assert len({e.event_id for e in letters}) == 2  # read twice, written as the same two dead letters


async def test_control_records_the_agent_cannot_use_are_skipped_and_it_still_obeys_the_next(settings, agent_id, spawn):
    """The streams worker dead-letters swarm.control's bad records (DEAD_LETTERED_BY); the agent skips them."""
    async with Log(settings, *TOPICS) as log:
        process = spawn()
        await registered(log, agent_id, 1)
        stray = stamp(GroundTruthUpdated, producer="operator", document_id="x", version=1, content="not control")
        await publish_control(settings, raw=b"garbage", key=agent_id)
        await publish_control(settings, raw=encode(stray), key=agent_id)
        await publish_control(settings, raw=b"someone else's garbage", key="agent-somebody-else")
        await publish_control(settings, stamp(DrainRequested, producer="operator", target=agent_id, reason="test"))
        assert process.wait(60) == 0  # drained
        await log.wait_for(lambda: log.named(AgentDeregistered, agent_id=agent_id))
    assert dead_letters(log, agent_id, "swarm.control") == []


class VoteFails:
    """A brain that raises on every ballot and answers everything else as the scripted brain does."""

    model = "vote-fails"

    def __init__(self) -> None:
        from swarmlog.actors.brains.scripted import ScriptedBrain

        self._scripted = ScriptedBrain()

    async def generate(self, prompt, json_schema, max_tokens):
        if "candidate_id" in json_schema["oneOf"][0]["properties"]:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return await self._scripted.generate(prompt, json_schema, max_tokens)

    def close(self) -> None:
        """Nothing to release."""


async def test_a_model_error_while_voting_does_not_wedge_the_agent(settings, agent_id, tmp_path):
    import asyncio
    import dataclasses

    from swarmlog.actors.shell.agent import AgentProcess
    from swarmlog.actors.shell.config import AgentConfig

    slot = slot_of(settings, agent_id)
    config = AgentConfig(agent_id, (), "scripted", None, None, "test-node", "region-0", slot, tmp_path)
    agent = AgentProcess(config, dataclasses.replace(settings, redis_url=None), VoteFails())
    ballot = stamp(
        VoteRequested,
        producer="coordinator:region-0",
        mission_id="m-vote",
        ballot_id=f"b-{agent_id}",
        voter_agent_id=agent_id,
        slot=slot,
        deadline_at=2**41,
        candidates=[{"candidate_id": "c1", "agent_id": "x", "output": "4"}],
    )
    task = task_assigned(agent_id, slot, "Say ok.", max_steps=1)
    async with Log(settings, *TOPICS) as log:
        running = asyncio.create_task(agent.run())
        try:
            await registered(log, agent_id, 1)
            await send_inbox(settings, slot, ballot, key=agent_id)
            await send_inbox(settings, slot, task)
            await log.wait_for(lambda: closed(log, task.mission_id), timeout_s=30)
        finally:
            agent.stop()
            await asyncio.wait_for(running, 30)
    assert not log.named(VoteCast, voter_agent_id=agent_id)  # it abstained
