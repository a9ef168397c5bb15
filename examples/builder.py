"""Build a mission with the typed builder, submit it and wait for its result (needs a running swarm).

    SWARMLOG_BOOTSTRAP=localhost:9092 python examples/builder.py
"""

from __future__ import annotations

from swarmlog.client import Consensus, FinalAction, Mission, SyncMissionClient, Task, outcome
from swarmlog.settings import Settings


def code_review_mission() -> Mission:
    """generate → (review ∥ test ×2) → consensus → ship/hold."""
    return Mission(
        title="Write, review and test a parse_duration() helper",
        tasks=(
            Task("generate", "Write a Python function parse_duration('1h30m') -> seconds.", capabilities=("coding",)),
            Task("review", "Review the code you are given; list one concrete improvement.",
                 capabilities=("review",), depends_on=("generate",)),
            Task("test", "Write pytest tests for the code you are given.", capabilities=("testing",),
                 depends_on=("generate",), replicas=2),
        ),
        consensus=Consensus(strategy="MAJORITY", window_s=30, quorum=0.5),
        final_action=FinalAction("Decide whether to ship the function; answer ship or hold with a reason."),
        token_budget=200_000,
        deadline_s=600,
    )


def main() -> None:
    """Submit the mission and print how it ended."""
    client = SyncMissionClient(Settings.from_env(), client_name="example")
    mission_id = client.submit(code_review_mission())
    print(f"submitted {mission_id}; `swarmlog watch {mission_id}` shows it live")
    result = client.wait(mission_id, timeout_s=600)
    print(result.name, outcome(result))


if __name__ == "__main__":
    main()
