"""The Faust app of the stream processors, built from the configuration (no module-level app)."""

from __future__ import annotations

from swarmlog.kafka.signing import signer_for, trust_for
from swarmlog.metrics import Sensor
from swarmlog.schemas.codec import codec_for

from . import budgets, deadlocks, liveness, memory
from .config import StreamsConfig
from .records import WorkerTopics
from .transport import WorkerApp


def build_app(config: StreamsConfig, sensor: Sensor | None = None) -> WorkerApp:
    """A Faust app with the registry, wait-graph, budget and (when Redis is set) memory processors."""
    app = WorkerApp(config.app_id, **config.faust_settings())
    settings = config.settings
    io = WorkerTopics(
        app,
        codec_for(settings.schema_registry_url),
        sensor or Sensor(),
        max_message_bytes=settings.max_message_bytes,
        signer=signer_for(settings),
        trust=trust_for(settings),
    )
    liveness.install(app, io, config)
    deadlocks.install(app, io, config)
    budgets.install(app, io, config)
    if config.settings.redis_url is not None:
        memory.install(app, io, config)
    return app
