"""Running the worker: create the catalog's and its own topics, write its budget window to the log, then run the
Faust app until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, NoReturn

import faust
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from swarmlog.errors import ConfigError, ServiceError
from swarmlog.kafka.admin import ensure_topics
from swarmlog.kafka.connection import client_options
from swarmlog.logs import hold_back_repeats
from swarmlog.metrics import sensor_for

from .budgets import announce_window
from .build import build_app
from .config import StreamsConfig
from .deadlocks import global_waits_topic
from .grouped import CHANGELOG_CONFIGS, GroupFold
from .transport import WorkerApp

TOPIC_ALREADY_EXISTS = 36
NOT_KNOWN_YET = (0, 3, 5)  # no error but no partitions, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE
DESCRIBE_S = 10.0
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
    Faust's own declaration can land after its first partition assignment, which then ignores those topics. A group
    fold's changelog gets its inputs' partition count; one that exists with another is a ChangelogPartitionsMismatch
    (exit 3)."""
    settings = config.settings
    admin = AIOKafkaAdminClient(**client_options(settings), client_id=config.app_id)
    await admin.start()
    try:
        await _ensure(admin, app, config)
    finally:
        await admin.close()


async def _ensure(admin: AIOKafkaAdminClient, app: WorkerApp, config: StreamsConfig) -> None:
    """Create what is missing; check each existing changelog's partitions (both brokers) and compaction (Kafka)."""
    settings = config.settings
    partitions = await changelog_partitions(admin, app.group_folds)
    folded = [
        NewTopic(
            fold.changelog, partitions[fold.changelog], settings.replication_factor, topic_configs=CHANGELOG_CONFIGS
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
    response = await admin.create_topics(wanted)
    existed = set()
    for name, code, *_ in response.topic_errors:
        if code not in (0, TOPIC_ALREADY_EXISTS):
            raise ServiceError(f"could not create the streams topic {name} (error code {code}); check the broker")
        if code == TOPIC_ALREADY_EXISTS:
            existed.add(name)
    await check_changelog_partitions(admin, [fold for fold in app.group_folds if fold.changelog in existed], partitions)
    if settings.broker != "tansu":  # Tansu neither compacts nor alters configs
        await _compact_as_folded([fold.changelog for fold in app.group_folds if fold.changelog in existed], admin)


class ChangelogPartitionsMismatch(ConfigError):
    """A fold's changelog has another partition count than the input topics it is co-partitioned with."""


async def changelog_partitions(admin: AIOKafkaAdminClient, folds: Sequence[GroupFold]) -> dict[str, int]:
    """The partition count each fold's changelog must have: its inputs' (a fold keeps the rows of input partition p
    in changelog partition p), as the broker has them, not as the settings say; a ConfigError when a fold's inputs
    are not co-partitioned."""
    counts = await _partitions(admin, sorted({topic for fold in folds for topic in fold.topics}))
    wanted = {}
    for fold in folds:
        per_input = {topic: counts[topic] for topic in fold.topics}
        if len(set(per_input.values())) != 1:
            raise ConfigError(
                f"the {fold.table} fold's input topics are not co-partitioned ({per_input}): its rows are kept per "
                "partition; give them one partition count"
            )
        wanted[fold.changelog] = per_input[fold.topics[0]]
    return wanted


async def check_changelog_partitions(
    admin: AIOKafkaAdminClient, folds: Sequence[GroupFold], wanted: dict[str, int]
) -> None:
    """A ChangelogPartitionsMismatch unless each existing changelog of `folds` has the partitions `wanted` says."""
    have = await _partitions(admin, [fold.changelog for fold in folds])
    for fold in folds:
        if have[fold.changelog] != wanted[fold.changelog]:
            raise ChangelogPartitionsMismatch(
                f"{fold.changelog} has {have[fold.changelog]} partitions and the {fold.table} fold's inputs "
                f"({', '.join(fold.topics)}) have {wanted[fold.changelog]}: the rows of input partition p are kept in "
                "changelog partition p, so they would be restored from the wrong one. Delete the changelog and the "
                f"consumer group {fold.group} (the worker folds the inputs again from their start), or give the "
                "inputs the changelog's partition count"
            )


async def _partitions(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, int]:
    """The partition count of each of `topics`, as the broker describes it (a topic created moments ago, here or by
    another worker, is described again until its partitions are known, for up to DESCRIBE_S)."""
    counts: dict[str, int] = {}
    deadline = time.monotonic() + DESCRIBE_S
    while unknown := [topic for topic in topics if topic not in counts]:
        for described in await admin.describe_topics(unknown):
            code, partitions = described["error_code"], described["partitions"]
            if not code and partitions:
                counts[described["topic"]] = len(partitions)
            elif code not in NOT_KNOWN_YET or time.monotonic() > deadline:
                raise ServiceError(
                    f"could not describe the topic {described['topic']} (error code {code}, "
                    f"{len(partitions)} partitions); check the broker"
                )
        if len(counts) < len(topics):
            await asyncio.sleep(0.2)
    return counts


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
