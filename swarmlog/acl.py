"""Least privilege per role: the Kafka ACLs each swarmlog role needs, derived from the topic catalog, the regions and
the streams worker's app id; which principals fill which role. Pure: `swarmlog.kafka.acls` applies them.

Each role's topics are what its processes produce to and consume from in the code (see docs/operations.md, "Roles and
ACLs"); tests/security/test_roles.py checks them against the code's own constants and a mission run under them."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Literal

from swarmlog.errors import ConfigError
from swarmlog.topics import (
    ALERTS,
    CONTROL,
    COORDINATORS,
    DEAD_LETTERS,
    EXPERIENCES,
    GROUND_TRUTH,
    HEARTBEATS,
    INBOX,
    JOURNAL,
    MISSIONS,
    REGISTRY,
    SLOTS,
    TASK_EVENTS,
    TOP_JOURNAL,
    USAGE,
    VOTES,
    WAITS,
    catalog,
)

if TYPE_CHECKING:
    from swarmlog.settings import Settings


class Role(enum.StrEnum):
    """What a principal does in a swarm; each has the grants of `grants`."""

    COORDINATOR = "coordinator"  # `swarmlog coordinator` and `swarmlog coordinator repair`
    TOP = "top"  # `swarmlog top`
    AGENT = "agent"  # `swarmlog agent`, `swarmlog fleet`
    STREAMS = "streams"  # `swarmlog streams`
    PRODUCER = "producer"  # `swarmlog submit` and any Kafka client that submits missions
    OPERATOR = "operator"  # read-only: `status`, `watch`, `replay`, `agents`, `console`


ResourceType = Literal["TOPIC", "GROUP", "TRANSACTIONAL_ID"]
PatternType = Literal["LITERAL", "PREFIXED"]
Operation = Literal["READ", "WRITE", "DESCRIBE", "CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"]

COORDINATOR_NAME = "swarmlog-coordinator-{region}"
"""A region's coordinator: its consumer group and its transactional id (coordinator/shell/service.py)."""
TOP_NAME = "swarmlog-top"
"""The top level's consumer group (coordinator/shell/top.py)."""

# What each role's processes write and read, topic by topic. Writing implies Describe (metadata, partitions); reading
# implies Describe and ListOffsets. Dead letters go to DEAD_LETTERS from the roles that consume a topic for its effects.
WRITES: Mapping[Role, tuple[str, ...]] = {
    Role.COORDINATOR: (JOURNAL, INBOX, SLOTS, COORDINATORS, DEAD_LETTERS),
    Role.TOP: (TOP_JOURNAL, MISSIONS, COORDINATORS),  # its decisions, the shares it submits, its announcements
    Role.AGENT: (TASK_EVENTS, HEARTBEATS, REGISTRY, EXPERIENCES, VOTES, WAITS, USAGE, SLOTS, DEAD_LETTERS),
    Role.STREAMS: (REGISTRY, CONTROL, ALERTS, DEAD_LETTERS),
    Role.PRODUCER: (MISSIONS,),
    Role.OPERATOR: (),
}
READS: Mapping[Role, tuple[str, ...]] = {
    Role.COORDINATOR: (MISSIONS, TASK_EVENTS, VOTES, REGISTRY, CONTROL, ALERTS, SLOTS, JOURNAL, COORDINATORS),
    Role.TOP: (MISSIONS, JOURNAL, COORDINATORS, TOP_JOURNAL),
    Role.AGENT: (INBOX, CONTROL, REGISTRY, TASK_EVENTS, VOTES, SLOTS, GROUND_TRUTH),
    Role.STREAMS: (REGISTRY, HEARTBEATS, WAITS, ALERTS, USAGE, CONTROL, EXPERIENCES),
    Role.PRODUCER: (COORDINATORS,),  # `swarmlog submit` places a mission on a region a live coordinator serves
    Role.OPERATOR: (),  # every topic: see grants
}
ADMIN_WRITES = (GROUND_TRUTH, CONTROL)
"""Topics that operators' own tools write (the ground truth; drains and re-syncs on swarm.control) and no swarmlog
command does: the admin writes them, or an operator grants a principal of their own."""


@dataclasses.dataclass(frozen=True, order=True)
class Grant:
    """One permission of a role: an operation on a resource, by its name or by a prefix of names."""

    role: Role
    resource_type: ResourceType
    name: str
    operation: Operation
    pattern: PatternType = "LITERAL"


@dataclasses.dataclass(frozen=True, order=True)
class Binding:
    """One ALLOW ACL, from any host: the principal may do the operation on the resource (Kafka's names: any
    resource type and operation, as the broker reports them, so that pruning sees every grant of a principal)."""

    principal: str
    resource_type: str
    name: str
    pattern: str
    operation: str

    @property
    def resource(self) -> str:
        """`TYPE:name`, a `*` ending a prefix of names."""
        return f"{self.resource_type}:{self.name}{'*' if self.pattern == 'PREFIXED' else ''}"

    def __str__(self) -> str:
        return f"{self.principal} {self.operation} {self.resource}"


def grants(settings: Settings, *, streams_app_id: str, ask_peers: bool = False) -> list[Grant]:
    """Every role's grants for a swarm of these settings whose streams workers run as `streams_app_id`;
    `ask_peers` lets agents write peers' inboxes (`swarmlog agent --ask-peers`), which the rule "coordinators alone
    write the inbox" otherwise forbids."""
    coordinators = [COORDINATOR_NAME.format(region=region) for region in settings.region_names]
    topics = [spec.name for spec in catalog(settings)]
    granted: list[Grant] = []
    for role in Role:
        granted += [Grant(role, "TOPIC", topic, "WRITE") for topic in WRITES[role]]
        granted += [Grant(role, "TOPIC", topic, "READ") for topic in READS[role]]
    if ask_peers:
        granted.append(Grant(Role.AGENT, "TOPIC", INBOX, "WRITE"))
    for name in coordinators:
        granted += [
            Grant(Role.COORDINATOR, "GROUP", name, "READ"),  # commits its inputs' offsets
            Grant(Role.COORDINATOR, "TRANSACTIONAL_ID", name, "WRITE"),  # fences and repairs its region's journal
            Grant(Role.OPERATOR, "GROUP", name, "DESCRIBE"),  # `status` shows the group's lag
        ]
    granted.append(Grant(Role.TOP, "GROUP", TOP_NAME, "READ"))
    # The streams worker checks the catalog at start (`swarmlog topics ensure`'s check: it must see every topic), and
    # holds every topic, group and transactional id named after its app id: tables' changelogs, Faust's internal
    # topics, its groups, and the transactional ids of SWARMLOG_STREAMS_GUARANTEE=exactly_once.
    touched = {grant.name for grant in granted if grant.role == Role.STREAMS}
    granted += [Grant(Role.STREAMS, "TOPIC", topic, "DESCRIBE") for topic in topics if topic not in touched]
    granted += [
        Grant(Role.STREAMS, "TOPIC", streams_app_id, operation, "PREFIXED")
        for operation in ("CREATE", "READ", "WRITE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS")
    ]
    granted += [
        Grant(Role.STREAMS, "GROUP", streams_app_id, "READ", "PREFIXED"),
        Grant(Role.STREAMS, "TRANSACTIONAL_ID", streams_app_id, "WRITE", "PREFIXED"),
    ]
    # The operator reads every topic, and the worker's changelogs (`replay diff`, `replay verify`); it writes nothing.
    granted += [Grant(Role.OPERATOR, "TOPIC", topic, "READ") for topic in topics]
    granted.append(Grant(Role.OPERATOR, "TOPIC", streams_app_id, "READ", "PREFIXED"))
    return sorted(set(granted))


@dataclasses.dataclass(frozen=True)
class RoleRow:
    """One role in the roles table: its principals and what it may do (a `*` ends a prefix of names)."""

    role: Role
    principals: tuple[str, ...]
    writes: tuple[str, ...]
    reads: tuple[str, ...]
    other_topics: tuple[str, ...]
    groups: tuple[str, ...]
    transactional_ids: tuple[str, ...]


def roles_table(granted: Iterable[Grant], principals: Mapping[Role, Iterable[str]]) -> list[RoleRow]:
    """The grants as one row per role, for `swarmlog acl show` and the docs."""
    by_role: dict[Role, list[Grant]] = {role: [] for role in Role}
    for grant in granted:
        by_role[grant.role].append(grant)

    def named(grants: Iterable[Grant], *, operation: bool = False) -> tuple[str, ...]:
        star = {"LITERAL": "", "PREFIXED": "*"}
        return tuple(
            f"{grant.name}{star[grant.pattern]}" + (f" ({grant.operation.lower()})" if operation else "")
            for grant in grants
        )

    return [
        RoleRow(
            role,
            tuple(principals.get(role, ())),
            named(g for g in grants if g.resource_type == "TOPIC" and g.operation == "WRITE"),
            named(g for g in grants if g.resource_type == "TOPIC" and g.operation == "READ"),
            named(
                (g for g in grants if g.resource_type == "TOPIC" and g.operation not in ("READ", "WRITE")),
                operation=True,
            ),
            named((g for g in grants if g.resource_type == "GROUP"), operation=True),
            named((g for g in grants if g.resource_type == "TRANSACTIONAL_ID"), operation=True),
        )
        for role, grants in by_role.items()
    ]


def bindings(granted: Iterable[Grant], principals: Mapping[Role, Iterable[str]]) -> set[Binding]:
    """The ACLs that give each principal its roles' grants."""
    return {
        Binding(principal, grant.resource_type, grant.name, grant.pattern, grant.operation)
        for grant in granted
        for principal in principals.get(grant.role, ())
    }


def parse_principals(values: Iterable[str]) -> dict[Role, tuple[str, ...]]:
    """`role=principal` pairs (`agent=User:agent-0`; a bare name is a User), as a role's principals; a ConfigError
    naming a malformed pair or an unknown role."""
    principals: dict[Role, list[str]] = {}
    for value in values:
        role, _, principal = (part.strip() for part in value.partition("="))
        if not principal or role not in {known.value for known in Role}:
            raise ConfigError(
                f"--principal {value!r} is not role=principal; roles: {', '.join(Role)}; for example "
                "--principal agent=User:agent-0"
            )
        principals.setdefault(Role(role), []).append(principal if ":" in principal else f"User:{principal}")
    return {role: tuple(dict.fromkeys(names)) for role, names in principals.items()}


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `swarmlog acl apply` changes: ACLs to create, and (with --prune) managed ACLs to delete."""

    create: frozenset[Binding]
    delete: frozenset[Binding]
    kept: int


def plan(wanted: set[Binding], existing: Iterable[Binding], *, prune: bool) -> Plan:
    """The changes that make the broker hold `wanted`; pruning deletes the other ACLs of the same principals only
    (the principals named are the ones swarmlog manages; others' ACLs are never touched)."""
    existing = set(existing)
    managed = {binding.principal for binding in wanted}
    stale = {binding for binding in existing - wanted if binding.principal in managed} if prune else set()
    return Plan(frozenset(wanted - existing), frozenset(stale), len(wanted & existing))
