"""Running the worker: create the catalog's and its own topics, write its budget window to the log, then run the
Faust app until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, NoReturn

import faust
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from swarmlog.errors import ServiceError
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.connection import client_options
from swarmlog.logs import hold_back_repeats
from swarmlog.metrics import sensor_for

from .budgets import announce_window
from .build import build_app
from .config import StreamsConfig
from .deadlocks import global_waits_topic
from .grouped import CHANGELOG_CONFIGS
from .transport import WorkerApp

TOPIC_ALREADY_EXISTS = 36
DYNAMIC_TOPIC_CONFIG = 1  # a DescribeConfigs entry's config_source: set on the topic


def run_worker(config: StreamsConfig, loglevel: str = "INFO") -> NoReturn:
    """Ensure the topics, then run the worker in the foreground; SIGTERM or SIGINT stops it cleanly (exit 0)."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    sensor, _server = sensor_for(config.settings.metrics_port)  # a daemon thread; it ends with the process
    app = build_app(config, sensor)
    loop.run_until_complete(ensure_topics(config.settings))
    loop.run_until_complete(ensure_internal_topics(app, config))
    loop.run_until_complete(announce_window(config))
    config.data_dir.mkdir(parents=True, exist_ok=True)
    worker = Worker(app, loop=loop, loglevel=logging.getLevelName(loglevel.upper()), redirect_stdouts=False)
    worker.execute_from_commandline()


class Worker(faust.Worker):  # its class name is in its log lines: "[^Worker]: Ready"
    """Faust's worker, with aiokafka's repeated errors held back as in every other swarmlog process (`logs.Repeats`):
    during a broker outage it would otherwise log dozens of identical lines a second."""

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        hold_back_repeats(logger)


async def ensure_internal_topics(app: WorkerApp, config: StreamsConfig) -> None:
    """Create the tables' changelogs and the global waits topic before Faust subscribes: on a fresh Apache Kafka,
    Faust's own declaration can land after its first partition assignment, which then ignores those topics."""
    settings = config.settings
    folded = [
        NewTopic(
            fold.changelog, settings.default_partitions, settings.replication_factor, topic_configs=CHANGELOG_CONFIGS
        )
        for fold in app.group_folds
    ]
    wanted = [NewTopic(global_waits_topic(config), 1, settings.replication_factor), *folded] + [
        NewTopic(
            table.changelog_topic.get_topic_name(),
            table.partitions or app.conf.topic_partitions,
            settings.replication_factor,
            topic_configs={"cleanup.policy": "compact"},
        )
        for table in app.tables.values()
    ]
    admin = AIOKafkaAdminClient(**client_options(settings), client_id=config.app_id)
    await admin.start()
    try:
        response = await admin.create_topics(wanted)
        existed = set()
        for name, code, *_ in response.topic_errors:
            if code not in (0, TOPIC_ALREADY_EXISTS):
                raise ServiceError(f"could not create the streams topic {name} (error code {code}); check the broker")
            if code == TOPIC_ALREADY_EXISTS:
                existed.add(name)
        if settings.broker != "tansu":  # Tansu neither compacts nor alters configs
            await _compact_as_folded([fold.changelog for fold in app.group_folds if fold.changelog in existed], admin)
    finally:
        await admin.close()


async def _compact_as_folded(changelogs: list[str], admin: AIOKafkaAdminClient) -> int:
    """Give changelogs made before their tables were folded in groups (by Faust, with Kafka's 7-day segments, which
    a restore would read whole) the segment and compaction settings of CHANGELOG_CONFIGS; returns how many it altered.

    Each changelog's configuration is described first and altered only where it differs, so a restart changes no
    topic. aiokafka has no IncrementalAlterConfigs, and AlterConfigs replaces a topic's whole set of overrides: the
    ones it has are sent along, so an operator's (say max.message.bytes) are kept."""
    if not changelogs:
        return 0
    described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name) for name in changelogs])
    resources = []
    for response in described:
        for code, message, _, name, entries in response.resources:
            if code:
                raise ServiceError(f"could not describe the configuration of {name}: {message} (error code {code})")
            values = {entry[0]: entry[1] for entry in entries}
            if all(values.get(key) == wanted for key, wanted in CHANGELOG_CONFIGS.items()):
                continue
            overrides = {entry[0]: entry[1] for entry in entries if _overridden(response.API_VERSION, entry)}
            resources.append(ConfigResource(ConfigResourceType.TOPIC, name, configs={**overrides, **CHANGELOG_CONFIGS}))
    if not resources:
        return 0
    for response in await admin.alter_configs(resources):
        for code, message, _, name in response.resources:
            if code:
                raise ServiceError(f"could not set the compaction of {name}: {message} (error code {code})")
    return len(resources)


def _overridden(version: int, entry: tuple[Any, ...]) -> bool:
    """Whether a described config entry is set on the topic itself (DescribeConfigs v0: not a default; v1 and later:
    its source is DYNAMIC_TOPIC_CONFIG)."""
    return not entry[3] if version == 0 else entry[3] == DYNAMIC_TOPIC_CONFIG
