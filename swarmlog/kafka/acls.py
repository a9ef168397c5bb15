"""Applies swarmlog's ACLs on Apache Kafka: reads the cluster's ACLs, creates the missing ones and, with prune, deletes
the stale ones of the principals it manages (swarmlog.acl decides which; this module only talks to the broker).

aiokafka 0.14's admin client has no ACL calls, so this speaks the protocol with aiokafka's own request structures
(CreateAcls, DescribeAcls and DeleteAcls v1: the oldest versions Kafka 4 still takes, answered by any broker)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError, for_code
from aiokafka.protocol.admin import CreateAclsRequest_v1, DeleteAclsRequest_v1, DescribeAclsRequest
from aiokafka.protocol.api import Request

from swarmlog.acl import Binding, Plan, plan
from swarmlog.errors import ConfigError, ServiceError
from swarmlog.kafka.connection import client_options, start
from swarmlog.settings import Settings, require_reachable

# Kafka's protocol codes (org.apache.kafka.common.acl.AclOperation, resource.ResourceType, PatternType).
RESOURCE_TYPES = {"TOPIC": 2, "GROUP": 3, "CLUSTER": 4, "TRANSACTIONAL_ID": 5, "DELEGATION_TOKEN": 6, "USER": 7}
PATTERNS = {"LITERAL": 3, "PREFIXED": 4}
OPERATIONS = {
    "ALL": 2,
    "READ": 3,
    "WRITE": 4,
    "CREATE": 5,
    "DELETE": 6,
    "ALTER": 7,
    "DESCRIBE": 8,
    "CLUSTER_ACTION": 9,
    "DESCRIBE_CONFIGS": 10,
    "ALTER_CONFIGS": 11,
    "IDEMPOTENT_WRITE": 12,
    "CREATE_TOKENS": 13,
    "DESCRIBE_TOKENS": 14,
    "TWO_PHASE_COMMIT": 15,
}
ANY = 1
ALLOW = 3
ANY_HOST = "*"
SECURITY_DISABLED = 54
CLUSTER_AUTHORIZATION_FAILED = 31
PROPAGATION_TIMEOUT_S = 15.0
"""How long `apply_acls` waits for the broker it asked to enforce what it changed."""


class _CreateAcls(Request[CreateAclsRequest_v1]):  # type: ignore[misc]  # aiokafka ships no types
    """CreateAcls with many creations in one request (aiokafka's CreateAclsRequest sends one)."""

    API_KEY = 30

    def __init__(self, bindings: Iterable[Binding]) -> None:
        self._creations = [(*_wire(binding), ALLOW) for binding in bindings]

    def build(self, request_struct_class: type[CreateAclsRequest_v1]) -> CreateAclsRequest_v1:
        return request_struct_class(self._creations)


class _DeleteAcls(Request[DeleteAclsRequest_v1]):  # type: ignore[misc]  # aiokafka ships no types
    """DeleteAcls with one exact filter per ACL, in one request."""

    API_KEY = 31

    def __init__(self, bindings: Iterable[Binding]) -> None:
        self._filters = [(*_wire(binding), ALLOW) for binding in bindings]

    def build(self, request_struct_class: type[DeleteAclsRequest_v1]) -> DeleteAclsRequest_v1:
        return request_struct_class(self._filters)


def _wire(binding: Binding) -> tuple[int, str, int, str, str, int]:
    """A binding's fields in the order CreateAcls and DeleteAcls v1 take them, up to the permission."""
    return (
        RESOURCE_TYPES[binding.resource_type],
        binding.name,
        PATTERNS[binding.pattern],
        binding.principal,
        ANY_HOST,
        OPERATIONS[binding.operation],
    )


async def apply_acls(settings: Settings, wanted: set[Binding], *, prune: bool, dry_run: bool) -> Plan:
    """Make the cluster hold `wanted` (and, with prune, no other ALLOW ACL of their principals); what it changed, or
    with dry_run what it would change. Runs as the admin: a principal that may describe and alter the cluster's
    ACLs (a super user)."""
    if settings.broker == "tansu":
        raise ConfigError(
            "ACLs are Kafka-only: Tansu, the embedded broker, has no authorizer; run `swarmlog acl apply` against "
            "Apache Kafka with an authorizer (SWARMLOG_BROKER=kafka or external)"
        )
    if not settings.bootstrap:
        raise ConfigError("no broker to apply ACLs to: set SWARMLOG_BOOTSTRAP (and the admin's credentials)")
    require_reachable(settings.bootstrap)
    admin = AIOKafkaAdminClient(**client_options(settings), client_id="swarmlog-acl")
    await start(admin, settings)  # a refused login ends here, saying why (exit 4)
    try:
        changes = plan(wanted, await _describe(admin, settings), prune=prune)
        if not dry_run and (changes.create or changes.delete):
            if changes.create:
                await _send(admin, settings, _CreateAcls(sorted(changes.create)), "creation_responses")
            if changes.delete:
                await _send(admin, settings, _DeleteAcls(sorted(changes.delete)), "filter_responses")
            await _enforced(admin, settings, changes)
        return changes
    except KafkaError as exc:
        raise ServiceError(f"the broker at {settings.bootstrap} failed an ACL request: {exc}") from exc
    finally:
        await admin.close()


async def _describe(admin: AIOKafkaAdminClient, settings: Settings) -> set[Binding]:
    """Every ALLOW ACL for any host on the cluster (DENY and host-bound ACLs are left out: swarmlog never makes them,
    and pruning leaves them alone)."""
    request = DescribeAclsRequest(ANY, None, ANY, None, None, ANY, ANY)  # None: any name, principal, host
    response = await admin._send_request(request)  # aiokafka's admin has no describe_acls
    _check(settings, response.error_code, response.error_message)
    resource_types = {code: name for name, code in RESOURCE_TYPES.items()}
    patterns = {code: name for name, code in PATTERNS.items()}
    operations = {code: name for name, code in OPERATIONS.items()}
    return {
        Binding(principal, resource_types[resource_type], name, patterns[pattern], operations[operation])
        for resource_type, name, pattern, acls in response.resources
        if resource_type in resource_types and pattern in patterns
        for principal, host, operation, permission in acls
        if host == ANY_HOST and permission == ALLOW and operation in operations
    }


async def _send(admin: AIOKafkaAdminClient, settings: Settings, request: Request[Any], results: str) -> None:
    """Send a CreateAcls or DeleteAcls request; a ConfigError or ServiceError for the first result that failed."""
    response = await admin._send_request(request)
    for result in getattr(response, results):
        _check(settings, result[0], result[1])


def _check(settings: Settings, code: int, message: str | None) -> None:
    """Nothing for 0; else the error, saying what to do."""
    if code == 0:
        return
    if code == SECURITY_DISABLED:
        raise ConfigError(
            f"the broker at {settings.bootstrap} has no authorizer, so it enforces no ACLs: set "
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer (and super.users) on it"
        )
    if code == CLUSTER_AUTHORIZATION_FAILED:
        raise ConfigError(
            f"{settings.kafka_username or 'this client'} may not describe or alter the ACLs of {settings.bootstrap}: "
            "run `swarmlog acl apply` as the admin (a principal in the brokers' super.users), with "
            "SWARMLOG_KAFKA_USERNAME and SWARMLOG_KAFKA_PASSWORD_FILE set to its credentials"
        )
    raise ServiceError(
        f"the broker at {settings.bootstrap} refused an ACL change: {message or for_code(code).__name__}"
    )


async def _enforced(admin: AIOKafkaAdminClient, settings: Settings, changes: Plan) -> None:
    """Wait until the broker reports the changes (a controller commits them first, brokers apply them after)."""
    deadline = time.monotonic() + PROPAGATION_TIMEOUT_S
    while True:
        held = await _describe(admin, settings)
        if changes.create <= held and not changes.delete & held:
            return
        if time.monotonic() > deadline:
            raise ServiceError(
                f"the broker at {settings.bootstrap} took the ACL changes but does not report them after "
                f"{PROPAGATION_TIMEOUT_S:.0f} s; run `swarmlog acl apply` again once the cluster is healthy"
            )
        await asyncio.sleep(0.2)
