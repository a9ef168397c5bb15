"""Apache Kafka with a SASL_SSL listener (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN) and a mutual-TLS one, an authorizer
that refuses what no ACL allows, and a user per role: the secured broker the security tests run on.

The node is `swarmlog.services.kafka`'s (its properties, storage format and process), given these listeners:
SASL_SSL for passwords, SSL with `ssl.client.auth=required` whose principal is the client certificate's CN, and the
CONTROLLER listener on mutual TLS too (the broker's own certificate, CN `broker`, a super user), so no listener takes
an unauthenticated client. Keystores and truststores are PEM files from `swarmlog.services.certs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import secrets
from collections.abc import Iterator, Sequence
from pathlib import Path

from swarmlog.acl import Binding
from swarmlog.kafka.acls import apply_acls
from swarmlog.kafka.connection import client_options, environment
from swarmlog.services import process
from swarmlog.services.certs import Authority, Issued
from swarmlog.services.kafka import KafkaNode, cluster_id, java_command, server_properties
from swarmlog.settings import SaslMechanism, Secret, SecurityProtocol, Settings

ROLES = ("admin", "coordinator", "agent", "streams", "producer", "operator")
"""A user per role; `admin` is a super user, the others have only what they are granted."""
SCRAM = ("SCRAM-SHA-512", "SCRAM-SHA-256")
GRANTED_PREFIXES = ("swarm", "streams-")
"""What `grant_roles` opens to every role: the catalog's topics, swarmlog's groups and transactional ids, and the
topics and group of a test's streams worker (`worker_harness.Worker` names its app `streams-<hex>`)."""
SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule required;"


@dataclasses.dataclass(frozen=True)
class User:
    """A role's principal: its name (also its certificates' CN), the file holding its password, and its client
    certificate from the broker's authority."""

    name: str
    password_file: Path
    cert: Issued


@dataclasses.dataclass(frozen=True)
class SecuredKafka:
    """A running secured node, the authorities and users to reach it with, and the session's Redis."""

    node: KafkaNode
    mtls_port: int
    authority: Authority
    """Signed the broker's certificate and every user's: the CA file clients are given."""
    stranger: Authority
    """An authority the broker does not know: its certificates are refused, and it can sign a broker nobody trusts."""
    users: dict[str, User]
    redis_url: str

    @property
    def sasl_bootstrap(self) -> str:
        """host:port of the SASL_SSL listener."""
        return self.node.bootstrap

    @property
    def mtls_bootstrap(self) -> str:
        """host:port of the mutual-TLS (SSL) listener."""
        return f"127.0.0.1:{self.mtls_port}"

    @property
    def ca_file(self) -> Path:
        """The CA certificate that signed the broker's certificate."""
        return self.authority.cert

    def settings_for(
        self, role: str, protocol: SecurityProtocol = "SASL_SSL", mechanism: SaslMechanism = "SCRAM-SHA-512"
    ) -> Settings:
        """Settings for a process of `role`: its password (a file) on SASL_SSL with `mechanism`, or its client
        certificate on SSL; the session's Redis."""
        user = self.users[role]
        if protocol == "SSL":
            connection = dict(
                bootstrap=self.mtls_bootstrap, kafka_cert_file=user.cert.cert, kafka_key_file=user.cert.key
            )
        else:
            connection = dict(
                bootstrap=self.sasl_bootstrap,
                kafka_sasl_mechanism=mechanism,
                kafka_username=user.name,
                kafka_password=Secret.from_file(user.password_file, "SWARMLOG_KAFKA_PASSWORD_FILE"),
            )
        return dataclasses.replace(
            Settings.from_env(),
            broker="kafka",
            redis_url=self.redis_url,
            kafka_security_protocol=protocol,
            kafka_ca_file=self.ca_file,
            **connection,
        )

    def environment(
        self, role: str, protocol: SecurityProtocol = "SASL_SSL", mechanism: SaslMechanism = "SCRAM-SHA-512"
    ) -> dict[str, str]:
        """The environment of a `swarmlog` process running as `role` (see `settings_for`)."""
        return process_environment(self.settings_for(role, protocol, mechanism))

    def grant(self, principals: Sequence[str], prefixes: Sequence[str]) -> None:
        """Allow `principals` (User:<name>) every operation on topics, groups and transactional ids starting with
        `prefixes`, as the admin (`swarmlog.kafka.acls.apply_acls`, which waits until the broker enforces them)."""
        wanted = {
            Binding(principal, resource_type, prefix, "PREFIXED", "ALL")
            for principal in principals
            for prefix in prefixes
            for resource_type in ("TOPIC", "GROUP", "TRANSACTIONAL_ID")
        }
        asyncio.run(apply_acls(self.settings_for("admin"), wanted, prune=False, dry_run=False))


def process_environment(settings: Settings) -> dict[str, str]:
    """The variables that make a `swarmlog` process use these settings' broker, Redis and Kafka credentials (its
    password as a file), over whatever the test's own environment says."""
    return {
        "SWARMLOG_BROKER": settings.broker,
        "SWARMLOG_BOOTSTRAP": settings.bootstrap or "",
        "SWARMLOG_REDIS_URL": settings.redis_url or "",
        **environment(settings),
    }


def grant_roles(kafka: SecuredKafka) -> None:
    """What the session's role users may do: everything on GRANTED_PREFIXES (least privilege per role is `swarmlog acl
    apply`'s, tested with principals of its own in test_acl_apply.py)."""
    kafka.grant([f"User:{role}" for role in ROLES if role != "admin"], GRANTED_PREFIXES)


def broker_properties(server: Issued, ca_file: Path, users: dict[str, str]) -> dict[str, str]:
    """The security part of the node's server.properties: listeners, TLS, SASL (PLAIN users with their passwords),
    principals from certificates, the authorizer."""
    plain = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return {
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,SSL:SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(server.bundle),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(ca_file),
        "listener.name.ssl.ssl.client.auth": "required",
        "listener.name.controller.ssl.client.auth": "required",
        "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
        "sasl.enabled.mechanisms": ",".join([*SCRAM, "PLAIN"]),
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": SCRAM_MODULE,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": SCRAM_MODULE,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": (
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};"
        ),
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin;User:broker",
        "allow.everyone.if.no.acl.found": "false",
    }


@contextlib.contextmanager
def run_secured_kafka(
    cache_dir: Path, workdir: Path, redis_url: str, timeout_s: float = 120.0
) -> Iterator[SecuredKafka]:
    """A fresh secured single-node Kafka in `workdir` (certificates, passwords, data), its users made at format time
    (SCRAM) and in its JAAS configuration (PLAIN); stopped on exit."""
    authority = Authority.create(workdir / "ca", "swarmlog test CA")
    stranger = Authority.create(workdir / "stranger", "an unrelated CA")
    passwords = {role: secrets.token_urlsafe(18) for role in ROLES}
    users = {}
    for role, password in passwords.items():
        password_file = workdir / "passwords" / role
        password_file.parent.mkdir(exist_ok=True)
        password_file.write_text(password + "\n")
        password_file.chmod(0o600)
        users[role] = User(role, password_file, authority.client(role))
    sasl_port, mtls_port, controller_port = process.free_ports(3)
    node = KafkaNode(1, sasl_port, controller_port, workdir / "kafka", java_command(cache_dir))
    node.workdir.mkdir()
    node.config.write_text(
        server_properties(
            node.workdir / "data",
            sasl_port,
            controller_port,
            listeners={"SASL_SSL": sasl_port, "SSL": mtls_port},
            extra=broker_properties(authority.server("broker"), authority.cert, passwords),
        )
    )
    node.format(
        cluster_id(),
        *(
            option
            for role, password in passwords.items()
            for mechanism in SCRAM
            for option in ("--add-scram", f"{mechanism}=[name={role},password={password}]")
        ),
    )
    kafka = SecuredKafka(node, mtls_port, authority, stranger, users, redis_url)
    admin = client_options(kafka.settings_for("admin"))
    node.probe = {option: value for option, value in admin.items() if option != "bootstrap_servers"}
    try:
        node.start(timeout_s)
        yield kafka
    finally:
        node.stop()
