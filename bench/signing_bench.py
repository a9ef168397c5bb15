"""Cost of signing per event: encode then read an event unsigned (the baseline) against signed and verified, in one run.

Columns: unsigned = encode + decode; sign = the headers of one record; verify = the signature and the claims of one
record; signed = encode + sign + verify + decode; ratio = signed / unsigned.

Run: python bench/signing_bench.py [--events N]
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Callable

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from rich.console import Console
from rich.table import Table

from swarmlog.claims import Principal
from swarmlog.kafka.records import input_event
from swarmlog.kafka.signing import Headers, Signer, Trust
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentHeartbeat, TaskCompleted
from swarmlog.topics import HEARTBEATS, TASK_EVENTS

KEY = Ed25519PrivateKey.generate()
SIGNER = Signer("agent-pool", KEY)
TRUST = Trust({"agent-pool": Principal("agent-pool", "agent", ("agent-*",))}, {"agent-pool": KEY.public_key()})


@dataclasses.dataclass(frozen=True)
class Record:
    """A consumed record: coordinates, key, value, headers."""

    topic: str
    key: bytes
    value: bytes
    headers: Headers
    partition: int = 0
    offset: int = 0


def samples() -> dict[str, tuple[str, Event]]:
    """A heartbeat (the most frequent event) and a task result with a 2 KB output, each with its topic."""
    envelope = {"occurred_at": 1, "producer": "agent:agent-7", "agent_id": "agent-7"}
    beat = AgentHeartbeat(
        event_id="e" * 32, **envelope, registration_id="r" * 32, sequence=9, status="IDLE", region="region-0", slot=7
    )
    result = TaskCompleted(
        event_id="f" * 32,
        **envelope,
        mission_id="m-1",
        task_id="t1",
        replica=0,
        attempt=1,
        output="x" * 2048,
        steps=2,
        latency_ms=900,
    )
    return {"AgentHeartbeat": (HEARTBEATS, beat), "TaskCompleted (2 KB)": (TASK_EVENTS, result)}


def per_event_us(run: Callable[[], object], events: int) -> float:
    """CPU microseconds per call of `run` (this process's CPU time, so other work on the machine counts less), the best
    of three rounds of `events` calls."""
    best = float("inf")
    for _ in range(3):
        started = time.process_time()
        for _ in range(events):
            run()
        best = min(best, time.process_time() - started)
    return best / events * 1e6


def main() -> None:
    """Print, per event kind: the unsigned write and read, the signed ones, and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=5000)
    events = parser.parse_args().events
    codec = default_codec()
    table = Table(title=f"signing cost per event, CPU µs (best of 3 x {events})")
    for column in ("event", "bytes", "unsigned µs", "sign µs", "verify µs", "signed µs", "ratio"):
        table.add_column(column, justify="right")
    for label, (topic, event) in samples().items():
        value = codec.encode(event)
        plain = Record(topic, b"agent-7", value, [])
        signed = dataclasses.replace(plain, headers=SIGNER.headers(topic, b"agent-7", value))
        unsigned = per_event_us(lambda: (codec.encode(event), input_event(codec, plain, None)), events)  # noqa: B023
        sign = per_event_us(lambda: SIGNER.headers(topic, b"agent-7", value), events)  # noqa: B023
        verify = per_event_us(lambda: TRUST.check(signed, event), events)  # noqa: B023
        both = per_event_us(
            lambda: (
                SIGNER.headers(topic, b"agent-7", codec.encode(event)),  # noqa: B023
                input_event(codec, signed, None, TRUST),  # noqa: B023
            ),
            events,
        )
        table.add_row(label, str(len(value)), f"{unsigned:.1f}", f"{sign:.1f}", f"{verify:.1f}", f"{both:.1f}",
                      f"{both / unsigned:.1f}x")  # fmt: skip
    Console().print(table)


if __name__ == "__main__":
    main()
