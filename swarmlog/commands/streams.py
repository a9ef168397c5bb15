"""`swarmlog streams`: run the stream processors (registry, liveness, deadlocks, budgets, memory) until SIGTERM."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from swarmlog.commands.common import one_line_errors
from swarmlog.redis_connection import RedisAccess
from swarmlog.settings import Settings
from swarmlog.streams.app import StreamsConfig, run_worker


@one_line_errors
def streams(
    bootstrap: Annotated[
        str | None, typer.Option(help="Kafka bootstrap servers (default: $SWARMLOG_BOOTSTRAP).")
    ] = None,
    redis_url: Annotated[
        str | None, typer.Option(help="Redis for the memory projection (default: $SWARMLOG_REDIS_URL).")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option(help="Where the RocksDB tables live ($SWARMLOG_STREAMS_DATA_DIR).")
    ] = None,
    loglevel: Annotated[str, typer.Option(help="Log level of the worker.")] = "INFO",
    metrics_port: Annotated[
        int | None, typer.Option(help="Serve Prometheus /metrics on this port; 0 = off ($SWARMLOG_METRICS_PORT).")
    ] = None,
) -> None:
    """Run the Faust worker in the foreground; SIGTERM or Ctrl-C stops it cleanly."""
    settings = Settings.from_env(bootstrap=bootstrap, redis_url=redis_url, metrics_port=metrics_port)
    access = RedisAccess.of(settings)
    if access is not None:
        access.check()  # a refused user or certificate stops the worker here (exit 4), not its memory agent later
    run_worker(StreamsConfig.from_env(settings, data_dir=data_dir), loglevel)
