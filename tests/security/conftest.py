"""The secured Kafka of the security tests: SASL_SSL and mutual TLS, ACLs enforced, a user per role."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from swarmlog.kafka.admin import ensure_topics
from swarmlog.settings import Settings

from .secured import SecuredKafka, grant_roles, run_secured_kafka


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory, redis_url: str) -> Iterator[SecuredKafka]:
    """One secured Kafka node for the session (tests/security/secured.py): the catalog's topics created by the admin,
    every other role granted what `grant_roles` grants, settings per role on the session's Redis."""
    workdir = tmp_path_factory.mktemp("secured-kafka")
    with run_secured_kafka(Settings.from_env().cache_dir, workdir, redis_url) as kafka:
        asyncio.run(ensure_topics(kafka.settings_for("admin")))
        grant_roles(kafka)
        yield kafka
