"""Full-size outputs through a mission and a replay (issue #13): an output of 2,048 tokens travels in the events, one
of 5 MB as an artifact's reference; both reach the final action and MissionCompleted, and a history exported with
its artifacts reads them back offline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from coordinator.live import journal, named

from swarmlog.artifacts import BlobDirectory
from swarmlog.client import MissionClient
from swarmlog.schemas.artifacts import parse
from swarmlog.schemas.records import MissionCompleted, TaskAssigned, TaskCompleted, TaskResultRecorded

sys.path[:0] = [str(Path(__file__).parent / "faults")]
from mission import REGION, crew

pytestmark = pytest.mark.slow
MB = 1024 * 1024
OUTPUTS = {
    "2048 tokens": " ".join(f"t{index:04d}" for index in range(2048)),  # the scripted brain counts words as tokens
    "5 MB": "0123456789abcdef" * (5 * MB // 16),
}


def swarmlog(settings, env, *args: str) -> str:
    """Run a swarmlog command on the session broker; its stdout."""
    return subprocess.run(
        [sys.executable, "-m", "swarmlog", *args],
        env=os.environ | env | {"SWARMLOG_BOOTSTRAP": settings.bootstrap, "SWARMLOG_BROKER": settings.broker},
        check=True,
        capture_output=True,
        text=True,
        timeout=180,
    ).stdout


@pytest.mark.parametrize("size", OUTPUTS)
async def test_a_full_size_output_goes_through_a_mission_and_a_replay(settings, tmp_path, size):
    content = OUTPUTS[size]
    answer = json.dumps({"action": "answer", "content": content, "confidence": 0.9})
    store = BlobDirectory(tmp_path / "artifacts")
    env = {"SWARMLOG_ARTIFACTS_DIR": str(store.root), "SWARMLOG_MAX_TOKENS": str(len(content) + 200)}
    async with crew(settings, tmp_path, agents=2, brain_ms=50, env_of=lambda _: env, script=[answer]) as swarm:
        mission_id = f"m-{uuid.uuid4().hex[:8]}"
        mission = {
            "mission_id": mission_id,
            "title": f"an output of {size}",
            "region": REGION,
            "tasks": [{"task_id": "write", "prompt": "Write it.", "required_capabilities": [swarm.capability]}],
            "final_action": {"prompt": "Pass it on.", "required_capabilities": ["decision_making"]},
        }
        client = MissionClient(settings)
        await client.submit(mission)
        ended = await client.wait(mission_id, REGION, timeout_s=180)
        await swarm.log.wait_for(lambda: len(swarm.log.named(TaskCompleted, mission_id=mission_id)) == 2)
    tokens = [e.completion_tokens for e in swarm.log.named(TaskCompleted, mission_id=mission_id)]
    assert min(tokens) >= len(content.split())  # 2,048 tokens in the first case
    assert isinstance(ended, MissionCompleted), ended
    events = await journal(settings, REGION, mission_id)
    (written,) = [e.output for e in named(events, TaskResultRecorded) if e.task_id == "write" and not e.stale]
    ref = parse(written or "")
    if size == "5 MB":  # by reference: the hash and size in the events, the bytes in the store
        assert ref is not None and ref.size == len(content) and store.get(ref) == content.encode()
    else:
        assert ref is None and written == content
    (final,) = [e for e in named(events, TaskAssigned) if e.kind == "FINAL"]
    assert final.inputs == {"consensus": written}  # the final agent read it (else its task fails: GAVE_UP)
    assert ended.outputs == [written]  # the final action answered with the same text, which travels the same way

    history = tmp_path / "mission.history.gz"
    exported = json.loads(swarmlog(settings, env, "replay", "export", "--out", str(history), "--mission", mission_id,
                                   "--json"))  # fmt: skip
    assert [a["problem"] for a in exported["artifacts"]] == ([None] if ref else [])
    if ref is None:
        assert not store.root.exists()  # an output that fits an event makes no artifact
    else:
        store.root.rename(tmp_path / "gone")  # the replay reads only the file and the artifacts beside it
    replayed = json.loads(
        swarmlog(settings, {}, "replay", "run", str(history), "--component", "mission", "--key", mission_id, "--json")
    )
    assert replayed["state"]["mission"]["decision"] == written
    listed = json.loads(swarmlog(settings, {}, "replay", "artifacts", str(history), "--json"))
    assert [(a["ref"], a["problem"]) for a in listed["artifacts"]] == ([(written, None)] if ref else [])
    if ref is not None:
        assert Path(listed["directory"], ref.sha256[:2], ref.sha256).read_bytes() == content.encode()
