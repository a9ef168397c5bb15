"""Creates or checks the catalog's topics on a broker, idempotently."""

from __future__ import annotations

import dataclasses
from typing import Literal

from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError, for_code

from swarmlog.errors import ServiceError
from swarmlog.settings import Settings, require_reachable
from swarmlog.topics import TopicSpec, catalog

TOPIC_ALREADY_EXISTS = 36
Action = Literal["created", "exists", "mismatch"]


@dataclasses.dataclass(frozen=True)
class TopicOutcome:
    """What `ensure_topics` found or did for one topic."""

    name: str
    action: Action
    partitions: int
    detail: str = ""


async def ensure_topics(settings: Settings) -> list[TopicOutcome]:
    """Create every missing catalog topic and check the existing ones against the catalog."""
    if not settings.bootstrap:
        raise ServiceError("no broker to create topics on: start one with `swarmlog up` or set SWARMLOG_BOOTSTRAP")
    require_reachable(settings.bootstrap)
    admin = AIOKafkaAdminClient(bootstrap_servers=settings.bootstrap, client_id="swarmlog-topics")
    await admin.start()
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
                outcomes.append(await _check(admin, settings, spec))
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
            "add partitions with kafka-topics --alter, or lower the SWARMLOG_* partition setting"
        )
    configs, note = await _describe_configs(admin, spec.name)
    for key, wanted in spec.configs(settings).items():
        if configs is not None and configs.get(key) != wanted:
            problems.append(f"{key}={configs.get(key)} but the catalog wants {wanted}")
    if problems:
        return TopicOutcome(spec.name, "mismatch", partitions, "; ".join(problems))
    return TopicOutcome(spec.name, "exists", partitions, note)


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
