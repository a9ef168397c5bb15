"""Prometheus metrics through sensor hooks: the shells call a `Sensor`, never domain code (faust's sensors model).

Every process builds one `Metrics` (its own registry, no module-level globals), hands it to its shell as the sensor,
and serves it with `serve(port)` on `--metrics-port` / `SWARMLOG_METRICS_PORT` (0 = off). Without metrics the shells
get `Sensor()`, whose hooks do nothing.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from swarmlog.errors import ConfigError

PROCESSES = ("coordinator", "agent", "streams")
TASK_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

# name -> (kind, help, labels): the one list of what swarmlog exports; the dashboard and tests check against it.
METRICS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "swarmlog_events_consumed_total": ("counter", "Records consumed, by topic.", ("topic",)),
    "swarmlog_events_produced_total": ("counter", "Events produced, by topic.", ("topic",)),
    "swarmlog_decode_failures_total": (
        "counter",
        "Records that did not decode (sent to the dead letters), by topic.",
        ("topic",),
    ),
    "swarmlog_task_assignments_total": ("counter", "TaskAssigned decisions of a coordinator, by region.", ("region",)),
    "swarmlog_queue_depth": ("gauge", "Task replicas queued for want of a free capable agent, by region.", ("region",)),
    "swarmlog_task_duration_seconds": ("histogram", "Time from an agent starting a task to its result.", ()),
    "swarmlog_heartbeat_age_seconds": ("gauge", "Seconds since an alive agent's last heartbeat.", ("agent",)),
    "swarmlog_tokens_total": (
        "counter",
        "Model tokens used, by agent and kind (prompt, completion).",
        ("agent", "kind"),
    ),
    "swarmlog_recovery_seconds": (
        "gauge",
        "How long the last recovery (state rebuilt from the log) took.",
        ("process",),
    ),
    "swarmlog_consumer_lag": ("gauge", "Records on a consumed topic past the consumer's position.", ("topic",)),
    "swarmlog_broker_waiting_seconds": (
        "gauge",
        "Seconds the process has been waiting for the broker to answer (0 while it answers).",
        (),
    ),
}


class Sensor:
    """The hooks a shell calls as work happens; this base does nothing (the shells' default)."""

    def on_consumed(self, topic: str) -> None:
        """A record of `topic` was consumed."""

    def on_produced(self, topic: str, count: int = 1) -> None:
        """`count` events were written to `topic`."""

    def on_decode_failure(self, topic: str) -> None:
        """A record of `topic` did not decode and went to the dead letters."""

    def on_assigned(self, region: str, count: int = 1) -> None:
        """The region's coordinator assigned `count` task attempts."""

    def on_queue_depth(self, region: str, depth: int) -> None:
        """The region's queue now holds `depth` task replicas."""

    def on_task_finished(self, seconds: float) -> None:
        """An agent finished a task (completed or failed) after `seconds`."""

    def on_heartbeat_age(self, agent: str, seconds: float | None) -> None:
        """An agent was last heard of `seconds` ago; None once it is dead or gone (its series is dropped)."""

    def on_tokens(self, agent: str, kind: str, count: int) -> None:
        """An agent used `count` tokens of `kind` (prompt or completion)."""

    def on_recovered(self, process: str, seconds: float) -> None:
        """The process rebuilt its state from the log in `seconds`."""

    def on_lag(self, topic: str, lag: int) -> None:
        """The consumer is `lag` records behind the ends of `topic`."""

    def on_broker_waiting(self, seconds: float) -> None:
        """The process has waited `seconds` for the broker to answer (0: it answers)."""


class Metrics(Sensor):
    """A sensor that records into its own Prometheus registry."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        kinds = {"counter": Counter, "gauge": Gauge, "histogram": Histogram}
        made = {}
        for name, (kind, doc, labels) in METRICS.items():
            short = name.removesuffix("_total") if kind == "counter" else name  # the client adds _total itself
            options = {"buckets": TASK_BUCKETS} if kind == "histogram" else {}
            made[name] = kinds[kind](short, doc, labels, registry=self.registry, **options)
        self._m = made

    def on_consumed(self, topic: str) -> None:
        self._m["swarmlog_events_consumed_total"].labels(topic).inc()

    def on_produced(self, topic: str, count: int = 1) -> None:
        if count:
            self._m["swarmlog_events_produced_total"].labels(topic).inc(count)

    def on_decode_failure(self, topic: str) -> None:
        self._m["swarmlog_decode_failures_total"].labels(topic).inc()

    def on_assigned(self, region: str, count: int = 1) -> None:
        self._m["swarmlog_task_assignments_total"].labels(region).inc(count)

    def on_queue_depth(self, region: str, depth: int) -> None:
        self._m["swarmlog_queue_depth"].labels(region).set(depth)

    def on_task_finished(self, seconds: float) -> None:
        self._m["swarmlog_task_duration_seconds"].observe(max(0.0, seconds))

    def on_heartbeat_age(self, agent: str, seconds: float | None) -> None:
        gauge = self._m["swarmlog_heartbeat_age_seconds"]
        if seconds is not None:
            gauge.labels(agent).set(max(0.0, seconds))
        else:
            with contextlib.suppress(KeyError):
                gauge.remove(agent)

    def on_tokens(self, agent: str, kind: str, count: int) -> None:
        if count:
            self._m["swarmlog_tokens_total"].labels(agent, kind).inc(count)

    def on_recovered(self, process: str, seconds: float) -> None:
        self._m["swarmlog_recovery_seconds"].labels(process).set(seconds)

    def on_lag(self, topic: str, lag: int) -> None:
        self._m["swarmlog_consumer_lag"].labels(topic).set(max(0, lag))

    def on_broker_waiting(self, seconds: float) -> None:
        self._m["swarmlog_broker_waiting_seconds"].set(max(0.0, seconds))


class Server:
    """A running /metrics HTTP endpoint; `close()` stops it (safe to call twice)."""

    def __init__(self, server: WSGIServer, thread: threading.Thread) -> None:
        self._server, self._thread = server, thread
        self.port: int = server.server_port

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()


def serve(metrics: Metrics, port: int, addr: str = "0.0.0.0") -> Server | None:
    """Serve `metrics` on http://addr:port/metrics in a daemon thread; None when port is 0 (metrics off)."""
    if port == 0:
        return None
    try:
        server, thread = start_http_server(port, addr=addr, registry=metrics.registry)
    except OSError as exc:
        raise ConfigError(
            f"cannot serve metrics on port {port}: {exc.strerror or exc}; choose another "
            "--metrics-port / SWARMLOG_METRICS_PORT, or 0 to turn metrics off"
        ) from None
    return Server(server, thread)


def sensor_for(port: int) -> tuple[Sensor, Server | None]:
    """The sensor a process should use for a metrics port, and its server (no-op sensor and no server for 0)."""
    if port == 0:
        return Sensor(), None
    metrics = Metrics()
    return metrics, serve(metrics, port)


def metric_names(text: Iterable[str] | str) -> set[str]:
    """The base metric names in Prometheus exposition text (histogram/counter suffixes folded back)."""
    lines = text.splitlines() if isinstance(text, str) else text
    names = set()
    for line in lines:
        if line and not line.startswith("#"):
            name = line.split("{", 1)[0].split(" ", 1)[0]
            if name.endswith("_created"):
                continue  # the client's creation timestamps of counters and histograms
            for suffix in ("_bucket", "_count", "_sum", "_created"):
                if name.endswith(suffix) and name.removesuffix(suffix) in METRICS:
                    name = name.removesuffix(suffix)
            names.add(name)
    return names
