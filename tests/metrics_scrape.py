"""What a swarmlog process shows on its /metrics, read as a test would scrape it."""

from __future__ import annotations

import urllib.request


def broker_waiting_seconds(port: int) -> float:
    """The process's swarmlog_broker_waiting_seconds, from its /metrics on `port`."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        for line in response.read().decode().splitlines():
            if line.startswith("swarmlog_broker_waiting_seconds "):
                return float(line.split()[1])
    raise AssertionError("no swarmlog_broker_waiting_seconds on /metrics")
