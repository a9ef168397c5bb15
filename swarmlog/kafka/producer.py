"""Produces swarmlog events: checks each against the topic catalog and the size limit, encodes, awaits delivery."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import ClusterAuthorizationFailedError, KafkaError, TransactionalIdAuthorizationFailed

from swarmlog.errors import AccessDenied, ConfigError, EncodeError, ServiceError
from swarmlog.kafka.connection import client_options, identity, unreachable
from swarmlog.kafka.partition_sets import cache_partition_sets
from swarmlog.kafka.signing import Headers, signer_for
from swarmlog.lifecycle import Running
from swarmlog.schemas.codec import Codec, codec_for
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings
from swarmlog.topics import TopicSpec, catalog


def idempotence_supported(settings: Settings) -> bool:
    """Whether the broker kind takes idempotent and transactional producers (Tansu does not)."""
    return settings.broker != "tansu"


class EventProducer(Running):
    """An aiokafka producer that only writes catalogued events to the topics that carry them."""

    def __init__(self, settings: Settings, *, client_id: str, transactional_id: str | None = None, **options: Any):
        if transactional_id and not idempotence_supported(settings):
            raise ServiceError(f"the {settings.broker} broker has no transactions; run without a transactional_id")
        self._settings = settings
        self._codec: Codec = codec_for(settings.schema_registry_url)
        self._topics: dict[str, TopicSpec] = {spec.name: spec for spec in catalog(settings)}
        self._signer = signer_for(settings)
        self._producer = AIOKafkaProducer(
            **client_options(settings),
            client_id=client_id,
            acks="all",
            enable_idempotence=idempotence_supported(settings),
            transactional_id=transactional_id,
            max_request_size=settings.max_message_bytes,
            **options,
        )
        cache_partition_sets(self._producer.client.cluster)

    async def start(self) -> None:
        """Connect to the broker; a ServiceError (AccessDenied when it refuses this process) says how to fix it."""
        try:
            await self._producer.start()
        except KafkaError as exc:
            reached = bool(self._producer.client.cluster.brokers())  # bootstrapped: the producer id step failed
            await self._producer.stop()
            if reached and isinstance(exc, (ClusterAuthorizationFailedError, TransactionalIdAuthorizationFailed)):
                raise AccessDenied(
                    f"Kafka at {self._settings.bootstrap} does not let {identity(self._settings)} start an idempotent "
                    f"producer ({exc}): its principal needs WRITE on the topics it writes (or IDEMPOTENT_WRITE on the "
                    "cluster), and WRITE on its transactional id if it has one; `swarmlog acl apply` grants each role "
                    "its own"
                ) from exc
            if reached and idempotence_supported(self._settings):
                raise ConfigError(
                    f"the broker at {self._settings.bootstrap} refused InitProducerId ({exc}), which the idempotent "
                    f"producer swarmlog uses on Apache Kafka needs; with SWARMLOG_BROKER={self._settings.broker} "
                    "swarmlog takes it for Kafka. If it is Tansu (the embedded broker of `swarmlog up`, which has no "
                    "idempotent or transactional producer), set SWARMLOG_BROKER=tansu: the export line `swarmlog up` "
                    "prints carries it"
                ) from exc
            raise await unreachable(self._settings, exc) from exc

    async def stop(self) -> None:
        """Flush what is pending and disconnect; safe to call twice."""
        await self._producer.stop()

    @property
    def raw(self) -> AIOKafkaProducer:
        """The underlying aiokafka producer (for transactions and offsets)."""
        return self._producer

    def encode_for(self, topic: str, event: Event) -> bytes:
        """The bytes of `event` for `topic`, or an EncodeError when it does not belong there or is too large."""
        spec = self._topics.get(topic)
        if spec is None:
            raise EncodeError(f"{topic!r} is not a swarmlog topic; see `swarmlog topics list`")
        if event.name not in spec.events:
            raise EncodeError(f"{event.name} does not belong on {topic}; it carries {', '.join(spec.events)}")
        payload = self._codec.encode(event)
        if len(payload) > self._settings.max_message_bytes:
            raise EncodeError(
                f"{event.name} {event.event_id} is {len(payload)} bytes, over the {self._settings.max_message_bytes}-byte "
                "limit; shorten it or raise SWARMLOG_MAX_MESSAGE_BYTES together with the topics' max.message.bytes"
            )
        return payload

    def headers_for(self, topic: str, key: bytes | None, value: bytes) -> Headers:
        """The headers that sign a record of this process (none when it has no signing key): every record it writes
        carries them, whichever client sends it."""
        return [] if self._signer is None else self._signer.headers(topic, key, value)

    @property
    def signature_bytes(self) -> int:
        """An upper bound on the bytes headers_for adds to each record (0 when this process does not sign)."""
        return 0 if self._signer is None else self._signer.overhead_bytes

    async def send(self, topic: str, event: Event, *, key: str | None = None, partition: int | None = None) -> None:
        """Write one event, signed when this process signs, and wait until the broker has it."""
        payload = self.encode_for(topic, event)
        encoded = None if key is None else key.encode()
        await self._producer.send_and_wait(
            topic, payload, key=encoded, partition=partition, headers=self.headers_for(topic, encoded, payload)
        )
