"""Creates or checks the catalog's topics on a broker, idempotently."""

from __future__ import annotations

import dataclasses
from typing import Literal

from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, for_code

from swarmlog.errors import ServiceError
from swarmlog.kafka.connection import client_options, start
from swarmlog.settings import Settings, require_reachable
from swarmlog.topics import INBOX, TopicSpec, catalog

TOPIC_ALREADY_EXISTS = 36
Action = Literal["created", "exists", "grown", "mismatch"]


@dataclasses.dataclass(frozen=True)
class TopicOutcome:
    """What `ensure_topics` found or did for one topic."""

    name: str
    action: Action
    partitions: int
    detail: str = ""


async def ensure_topics(settings: Settings, *, grow_inbox: bool = False) -> list[TopicOutcome]:
    """Create every missing catalog topic and check the existing ones against the catalog; with `grow_inbox`, add
    the inbox partitions the settings ask for (Kafka only).

    Only the inbox may grow: its records go to explicit partitions (the recipient's slot), so adding partitions moves
    no message and routes none elsewhere. A keyed topic would send a key's later records to another partition than
    its earlier ones, which breaks the per-key order every fold relies on."""
    if not settings.bootstrap:
        raise ServiceError("no broker to create topics on: start one with `swarmlog up` or set SWARMLOG_BOOTSTRAP")
    require_reachable(settings.bootstrap)
    admin = AIOKafkaAdminClient(**client_options(settings), client_id="swarmlog-topics")
    await start(admin, settings)
    try:
        specs = catalog(settings)
        existing = set(await admin.list_topics())
        missing = [spec for spec in specs if spec.name not in existing]
        created = await _create(admin, settings, missing) if missing else set()
        outcomes = []
        for spec in specs:
            if spec.name in created:
                outcomes.append(TopicOutcome(spec.name, "created", spec.partitions))
            else:
                outcome = await _check(admin, settings, spec)
                if grow_inbox and spec.name == INBOX and outcome.partitions < spec.partitions:
                    outcome = await _grow(admin, settings, spec, outcome.partitions)
                outcomes.append(outcome)
        return outcomes
    except KafkaError as exc:
        raise ServiceError(f"the broker at {settings.bootstrap} refused a topic request: {exc}") from exc
    finally:
        await admin.close()


async def _create(admin: AIOKafkaAdminClient, settings: Settings, specs: list[TopicSpec]) -> set[str]:
    """Create topics; the names created now (a concurrent creator's topics count as existing)."""
    new_topics = [
        NewTopic(spec.name, spec.partitions, settings.replication_factor, topic_configs=spec.configs(settings))
        for spec in specs
    ]
    response = await admin.create_topics(new_topics)
    created = set()
    for topic_error in response.topic_errors:
        name, code = topic_error[0], topic_error[1]
        if code == 0:
            created.add(name)
        elif code != TOPIC_ALREADY_EXISTS:
            raise ServiceError(f"could not create topic {name}: {for_code(code).__name__} (error code {code})")
    return created


async def _check(admin: AIOKafkaAdminClient, settings: Settings, spec: TopicSpec) -> TopicOutcome:
    """Compare an existing topic's partitions and configuration with its catalog entry."""
    (described,) = await admin.describe_topics([spec.name])
    partitions = len(described["partitions"])
    problems = []
    if partitions < spec.partitions:
        problems.append(
            f"has {partitions} partitions, the catalog wants {spec.partitions}: "
            + (
                "grow it with `swarmlog topics ensure --grow-inbox` (Kafka), or lower SWARMLOG_INBOX_PARTITIONS"
                if spec.name == INBOX
                else "lower the SWARMLOG_* partition setting (more partitions would reorder its keys)"
            )
        )
    configs, note = await _describe_configs(admin, spec.name)
    for key, wanted in spec.configs(settings).items():
        if configs is not None and configs.get(key) != wanted:
            problems.append(f"{key}={configs.get(key)} but the catalog wants {wanted}")
    if problems:
        return TopicOutcome(spec.name, "mismatch", partitions, "; ".join(problems))
    return TopicOutcome(spec.name, "exists", partitions, note)


async def _grow(admin: AIOKafkaAdminClient, settings: Settings, spec: TopicSpec, had: int) -> TopicOutcome:
    """Add partitions to a topic up to its catalog count; a mismatch saying why where the broker cannot."""
    if settings.broker == "tansu":
        return TopicOutcome(
            spec.name,
            "mismatch",
            had,
            f"has {had} partitions, the catalog wants {spec.partitions}: adding partitions is Kafka-only (Tansu "
            "cannot); start the embedded broker again with the larger SWARMLOG_INBOX_PARTITIONS",
        )
    response = await admin.create_partitions({spec.name: NewPartitions(spec.partitions)})
    for topic_error in response.topic_errors:
        if topic_error[1] != 0:
            raise ServiceError(
                f"could not grow {spec.name} to {spec.partitions} partitions: {for_code(topic_error[1]).__name__} "
                f"({topic_error[2]})"
            )
    return TopicOutcome(spec.name, "grown", spec.partitions, f"grown from {had} partitions")


async def _describe_configs(admin: AIOKafkaAdminClient, name: str) -> tuple[dict[str, str] | None, str]:
    """A topic's configuration, or None with a note when the broker cannot describe it (Tansu)."""
    try:
        (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    except KafkaError as exc:
        return None, f"configuration not checked: the broker cannot describe it ({type(exc).__name__})"
    (resource,) = response.resources
    error_code, error_message, entries = resource[0], resource[1], resource[4]
    if error_code:
        return None, f"configuration not checked: {error_message or for_code(error_code).__name__}"
    return {entry[0]: entry[1] for entry in entries}, ""
