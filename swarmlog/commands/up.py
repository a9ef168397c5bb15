"""`swarmlog up`: run a local broker and Redis in the foreground until SIGINT or SIGTERM."""

from __future__ import annotations

import dataclasses
import signal
import threading
from typing import Annotated, Literal

import typer

from swarmlog.commands.common import one_line_errors, out
from swarmlog.kafka.connection import environment, plaintext
from swarmlog.services import Services, open_services
from swarmlog.services.supervisor import POLL_S, first_death
from swarmlog.settings import Settings

EmbeddedBroker = Literal["tansu", "kafka", "docker"]
LABELS = {"tansu": "Tansu (in memory)", "kafka": "Apache Kafka", "docker": "Apache Kafka in Docker"}


@one_line_errors
def up(
    broker: Annotated[
        EmbeddedBroker,
        typer.Option(
            help="tansu: embedded, in memory, no transactions; kafka: Apache Kafka 4.1 from Maven Central; "
            "docker: Apache Kafka and Redis containers.",
        ),
    ] = "tansu",
) -> None:
    """Start a broker and Redis on free local ports, print where they listen, stop them on Ctrl-C or SIGTERM.

    If either exits on its own, `up` says which and how, with the end of its log, stops the other and exits 1.
    """
    stopping = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stopping.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        # `up` starts its own services, so ignore SWARMLOG_BOOTSTRAP / SWARMLOG_REDIS_URL and Kafka security settings
        # of the environment: its broker is plaintext.
        settings = plaintext(dataclasses.replace(Settings.from_env(broker=broker), bootstrap=None, redis_url=None))
        with open_services(settings) as services:
            out.print(f"[bold]{LABELS[broker]}[/] listening on [cyan]{services.broker.bootstrap}[/]", highlight=False)
            if not services.broker.supports_transactions:
                out.print("  no transactions or idempotent producer: use --broker kafka for those", highlight=False)
            out.print(f"[bold]Redis[/] listening on [cyan]{services.redis.url}[/]", highlight=False)
            out.print("Use them from another shell with:", highlight=False)
            out.print(export_line(settings, services), markup=False, highlight=False, soft_wrap=True)
            out.print("Ctrl-C stops them.", highlight=False)
            while not stopping.wait(timeout=POLL_S):
                death = first_death(services.children)
                if death is not None:
                    raise death
        out.print("stopped", highlight=False)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def export_line(settings: Settings, services: Services) -> str:
    """The shell line that points processes at these services: every non-secret setting they need to work together,
    and secrets as the files that hold them (SWARMLOG_KAFKA_PASSWORD_FILE), never their values."""
    values = {
        "SWARMLOG_BROKER": {"docker": "kafka"}.get(services.broker.kind, services.broker.kind),
        "SWARMLOG_BOOTSTRAP": services.broker.bootstrap,
        "SWARMLOG_REDIS_URL": services.redis.url,
        "SWARMLOG_REGIONS": settings.regions,
        "SWARMLOG_INBOX_PARTITIONS": settings.inbox_partitions,
        **{name: value for name, value in environment(settings).items() if value},
    }
    return "export " + " ".join(f"{name}={value}" for name, value in values.items())
