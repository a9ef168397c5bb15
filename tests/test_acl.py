"""The roles' ACLs, derived without a broker: who may write what, and that they match what the code reads and writes."""

from __future__ import annotations

import pytest

from swarmlog import topics
from swarmlog.acl import (
    ADMIN_WRITES,
    COORDINATOR_NAME,
    TOP_NAME,
    Binding,
    Grant,
    Role,
    bindings,
    grants,
    parse_principals,
    plan,
    roles_table,
)
from swarmlog.actors.domain import PROJECTION as AGENT_PROJECTION
from swarmlog.coordinator.shell import top
from swarmlog.coordinator.shell.service import INPUT_TOPICS, CoordinatorService
from swarmlog.errors import ConfigError
from swarmlog.kafka.acls import apply_acls
from swarmlog.kafka.records import DEAD_LETTERED_BY
from swarmlog.settings import Settings
from swarmlog.streams import budgets, registry, waitgraph
from swarmlog.streams.app.config import StreamsConfig, worker_setting
from swarmlog.streams.app.deadlocks import global_waits_topic
from swarmlog.streams.app.grouped import changelog_topic, group_of

SETTINGS = Settings(regions=3)
APP_ID = "swarmlog-streams"
GRANTS = grants(SETTINGS, streams_app_id=APP_ID)
CATALOG = {spec.name for spec in topics.catalog(SETTINGS)}


def topics_of(role: Role, operation: str, granted: list[Grant] = GRANTS) -> set[str]:
    """The topics a role may do `operation` on, by literal name."""
    return {
        g.name
        for g in granted
        if g.role == role and g.resource_type == "TOPIC" and g.operation == operation and g.pattern == "LITERAL"
    }


def test_a_mission_producer_writes_swarm_missions_and_nothing_else() -> None:
    producer = [g for g in GRANTS if g.role == Role.PRODUCER]

    assert {(g.resource_type, g.name, g.operation) for g in producer} == {
        ("TOPIC", topics.MISSIONS, "WRITE"),
        ("TOPIC", topics.COORDINATORS, "READ"),  # `swarmlog submit` places missions on served regions
    }


def test_coordinators_alone_write_the_journal_and_the_inbox() -> None:
    writers = {topic: {g.role for g in GRANTS if g.name == topic and g.operation == "WRITE"} for topic in CATALOG}

    assert writers[topics.JOURNAL] == {Role.COORDINATOR}
    assert writers[topics.INBOX] == {Role.COORDINATOR}
    assert writers[topics.TOP_JOURNAL] == {Role.TOP}


def test_agents_asking_peers_write_the_inbox_only_when_asked_for() -> None:
    asking = grants(SETTINGS, streams_app_id=APP_ID, ask_peers=True)

    assert set(asking) - set(GRANTS) == {Grant(Role.AGENT, "TOPIC", topics.INBOX, "WRITE")}


def test_every_topic_has_a_writer_and_a_reader_besides_the_operator() -> None:
    written = {g.name for g in GRANTS if g.operation == "WRITE"}
    read = {g.name for g in GRANTS if g.operation == "READ" and g.role != Role.OPERATOR}

    assert CATALOG - written == {topics.GROUND_TRUTH}  # written by operators' own tools, as the admin
    assert set(ADMIN_WRITES) <= CATALOG
    assert CATALOG - read == {topics.DEAD_LETTERS}  # read by the operator's console, replay and status alone


def test_the_operator_reads_everything_and_changes_nothing() -> None:
    operator = [g for g in GRANTS if g.role == Role.OPERATOR]

    assert {g.operation for g in operator} == {"READ", "DESCRIBE"}
    assert topics_of(Role.OPERATOR, "READ") == CATALOG
    assert {g.name for g in operator if g.resource_type == "GROUP"} == {
        COORDINATOR_NAME.format(region=region) for region in SETTINGS.region_names
    }


def test_each_role_reads_what_its_processes_consume() -> None:
    assert set(INPUT_TOPICS) | {topics.JOURNAL} <= topics_of(Role.COORDINATOR, "READ")
    assert set(AGENT_PROJECTION.topics) | {topics.INBOX, topics.SLOTS} <= topics_of(Role.AGENT, "READ")
    folded = {*registry.PROJECTION.topics, *budgets.PROJECTION.topics, *waitgraph.PROJECTION.topics}
    assert folded <= topics_of(Role.STREAMS, "READ")


def test_agents_write_the_topics_the_catalog_names_them_writers_of_but_the_inbox() -> None:
    catalogued = {spec.name for spec in topics.catalog(SETTINGS) if "agent" in spec.writers} - {topics.INBOX}

    assert topics_of(Role.AGENT, "WRITE") == catalogued | {topics.DEAD_LETTERS}


def test_dead_letters_come_from_the_roles_that_consume_a_topic_for_its_effects() -> None:
    for topic, role in DEAD_LETTERED_BY.items():
        assert topic in topics_of(Role(role), "READ"), (topic, role)
        assert topics.DEAD_LETTERS in topics_of(Role(role), "WRITE"), role


def test_groups_and_transactional_ids_are_the_ones_the_processes_use() -> None:
    for region in SETTINGS.region_names:
        name = CoordinatorService(SETTINGS, region)._name
        assert Grant(Role.COORDINATOR, "GROUP", name, "READ") in GRANTS
        assert Grant(Role.COORDINATOR, "TRANSACTIONAL_ID", name, "WRITE") in GRANTS
    assert top.NAME == TOP_NAME
    assert Grant(Role.TOP, "GROUP", top.NAME, "READ") in GRANTS


def test_the_streams_worker_holds_every_name_under_its_app_id() -> None:
    app_id = worker_setting("app_id", {})
    config = StreamsConfig(Settings(bootstrap="127.0.0.1:9092"), app_id=app_id)
    own = [g for g in grants(SETTINGS, streams_app_id=app_id) if g.role == Role.STREAMS and g.pattern == "PREFIXED"]
    names = [changelog_topic(app_id, "registry"), group_of(app_id, "budgets"), global_waits_topic(config), app_id]

    assert {g.name for g in own} == {app_id}
    assert all(name.startswith(app_id) for name in names)
    assert {(g.resource_type, g.operation) for g in own} >= {
        ("TOPIC", "CREATE"),
        ("TOPIC", "READ"),
        ("TOPIC", "WRITE"),
        ("GROUP", "READ"),
        ("TRANSACTIONAL_ID", "WRITE"),
    }
    # It checks the whole catalog at start (a topic it cannot see, it would try to create).
    assert {g.name for g in GRANTS if g.role == Role.STREAMS and g.resource_type == "TOPIC"} >= CATALOG


def test_principals_fill_roles_and_each_gets_its_roles_grants() -> None:
    principals = parse_principals(["agent=User:agent-0", "agent=agent-1", "producer=User:ci", "agent=agent-1"])

    assert principals == {Role.AGENT: ("User:agent-0", "User:agent-1"), Role.PRODUCER: ("User:ci",)}
    acls = bindings(GRANTS, principals)
    assert Binding("User:ci", "TOPIC", topics.MISSIONS, "LITERAL", "WRITE") in acls
    assert len(acls) == 2 * sum(g.role == Role.AGENT for g in GRANTS) + sum(g.role == Role.PRODUCER for g in GRANTS)


@pytest.mark.parametrize("value", ["agent", "agent=", "janitor=User:x", "=User:x"])
def test_a_malformed_principal_says_how_to_write_one(value: str) -> None:
    with pytest.raises(ConfigError, match="role=principal"):
        parse_principals([value])


def test_a_second_apply_creates_nothing_and_pruning_touches_only_named_principals() -> None:
    wanted = bindings(GRANTS, {Role.PRODUCER: ("User:ci",)})
    broad = Binding("User:ci", "TOPIC", "swarm", "PREFIXED", "ALL")
    others = Binding("User:someone", "TOPIC", topics.JOURNAL, "LITERAL", "WRITE")

    first = plan(wanted, {broad, others}, prune=False)
    second = plan(wanted, wanted | {broad, others}, prune=False)
    pruned = plan(wanted, wanted | {broad, others}, prune=True)

    assert first.create == wanted and not first.delete
    assert not second.create and not second.delete and second.kept == len(wanted)
    assert pruned.delete == {broad}


def test_the_roles_table_has_a_row_per_role() -> None:
    rows = {row.role: row for row in roles_table(GRANTS, {Role.PRODUCER: ("User:ci",)})}

    assert list(rows) == list(Role)
    assert rows[Role.PRODUCER].writes == (topics.MISSIONS,)
    assert rows[Role.PRODUCER].principals == ("User:ci",)
    assert f"{APP_ID}* (create)" in rows[Role.STREAMS].other_topics
    assert rows[Role.OPERATOR].writes == ()


async def test_acls_on_tansu_are_refused_as_kafka_only() -> None:
    with pytest.raises(ConfigError, match="ACLs are Kafka-only"):
        await apply_acls(Settings(broker="tansu", bootstrap="127.0.0.1:9092"), set(), prune=False, dry_run=True)
