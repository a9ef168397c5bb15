"""Signing events: the claims verdict (pure), Ed25519 over topic, key and value, the trust file and key generation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from swarmlog.claims import Principal, Refused, verdict
from swarmlog.cli import app
from swarmlog.errors import ConfigError
from swarmlog.kafka.records import VERIFIED_TOPICS, input_event
from swarmlog.kafka.signing import (
    SIGNATURE_HEADER,
    SIGNER_HEADER,
    SignatureRejected,
    Signer,
    Trust,
    load_trust,
    signer_for,
    trust_entry,
)
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import AgentHeartbeat, CoordinatorAnnounced, TaskAssigned
from swarmlog.settings import Settings
from swarmlog.topics import HEARTBEATS, INBOX, MISSIONS, REGISTRY

POOL_A = Principal("agent-pool-a", "agent", ("gpu-a-*",))
POOL_B = Principal("agent-pool-b", "agent", ("gpu-b-*",))
COORDINATOR = Principal("coordinator-0", "coordinator", ("region-0",))
STREAMS = Principal("streams", "streams")
PRINCIPALS = {p.name: p for p in (POOL_A, POOL_B, COORDINATOR, STREAMS)}
KEYS = {name: Ed25519PrivateKey.generate() for name in PRINCIPALS}
TRUST = Trust(PRINCIPALS, {name: key.public_key() for name, key in KEYS.items()})


def heartbeat(agent_id: str, producer: str | None = None) -> AgentHeartbeat:
    """A heartbeat of `agent_id`, written as `agent:<agent_id>` unless `producer` says otherwise."""
    return AgentHeartbeat(
        event_id=f"hb-{agent_id}",
        occurred_at=1,
        producer=producer or f"agent:{agent_id}",
        agent_id=agent_id,
        registration_id="r1",
        sequence=1,
        status="IDLE",
        region="region-0",
        slot=3,
    )


def assigned(region: str, agent_id: str = "gpu-a-1") -> TaskAssigned:
    """A TaskAssigned written by the coordinator of `region`."""
    return TaskAssigned(
        event_id="ta-1",
        occurred_at=1,
        producer=f"coordinator:{region}",
        mission_id="m1",
        task_id="t1",
        replica=0,
        attempt=1,
        agent_id=agent_id,
        slot=3,
        score=1.0,
        prompt="p",
    )


@dataclasses.dataclass(frozen=True)
class Record:
    """A consumed record as readers see it: coordinates, key, value and headers."""

    topic: str
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    partition: int = 0
    offset: int = 7


def signed(event: Event, topic: str, principal: str, key: bytes | None = b"k") -> Record:
    """The record of `event` on `topic` as `principal` writes it."""
    value = default_codec().encode(event)
    return Record(topic, key, value, tuple(Signer(principal, KEYS[principal]).headers(topic, key, value)))


# The claims verdict, given the signature's outcome.


def test_an_agent_principal_claims_the_agent_ids_of_its_patterns() -> None:
    assert verdict(heartbeat("gpu-a-7"), "agent-pool-a", True, PRINCIPALS) is None
    refused = verdict(heartbeat("gpu-b-1"), "agent-pool-a", True, PRINCIPALS)
    assert refused is not None and refused.kind == "over-claim" and "gpu-b-1" in refused.detail


def test_the_agent_id_in_the_producer_is_claimed_too() -> None:
    refused = verdict(heartbeat("gpu-a-1", producer="agent:gpu-b-1"), "agent-pool-a", True, PRINCIPALS)
    assert refused is not None and refused.kind == "over-claim" and "gpu-b-1" in refused.detail


def test_a_coordinator_principal_claims_its_regions_and_names_any_agent() -> None:
    assert verdict(assigned("region-0", agent_id="gpu-b-9"), "coordinator-0", True, PRINCIPALS) is None
    refused = verdict(assigned("region-1"), "coordinator-0", True, PRINCIPALS)
    assert refused is not None and refused.kind == "over-claim" and "region-1" in refused.detail
    announced = CoordinatorAnnounced(
        event_id="c1",
        occurred_at=1,
        producer="coordinator:region-0",
        region="region-2",
        coordinator_id="c",
        serving=True,
        interval_ms=1,
        agents=0,
        idle_agents=0,
        active_missions=0,
    )
    assert verdict(announced, "coordinator-0", True, PRINCIPALS) == Refused(
        "over-claim", "'coordinator-0' may claim region-0, but CoordinatorAnnounced c1 names region-2"
    )


def test_only_an_agent_may_write_as_an_agent_and_only_a_coordinator_as_a_coordinator() -> None:
    assert verdict(heartbeat("gpu-a-1"), "coordinator-0", True, PRINCIPALS) == Refused(
        "over-claim", "'coordinator-0' (coordinator) wrote AgentHeartbeat as 'agent:gpu-a-1'"
    )
    refused = verdict(assigned("region-0"), "agent-pool-a", True, PRINCIPALS)
    assert refused is not None and refused.kind == "over-claim"
    assert verdict(heartbeat("gpu-a-1"), "streams", True, PRINCIPALS) is not None


@pytest.mark.parametrize(
    ("signer", "valid", "kind"),
    [(None, False, "unsigned"), ("mallory", True, "unknown-signer"), ("agent-pool-a", False, "bad-signature")],
)
def test_unsigned_unknown_and_badly_signed_are_refused(signer: str | None, valid: bool, kind: str) -> None:
    refused = verdict(heartbeat("gpu-a-1"), signer, valid, PRINCIPALS)
    assert refused is not None and refused.kind == kind


# Signatures over topic, key and value, checked by the adapter.


def test_a_signed_record_verifies_and_decodes() -> None:
    record = signed(heartbeat("gpu-a-2"), HEARTBEATS, "agent-pool-a")
    assert TRUST.refusal(record, heartbeat("gpu-a-2")) is None
    assert input_event(default_codec(), record, ["AgentHeartbeat"], TRUST) == heartbeat("gpu-a-2")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda r: dataclasses.replace(r, value=r.value[:-1] + bytes([r.value[-1] ^ 1])),
        lambda r: dataclasses.replace(r, key=b"other"),
        lambda r: dataclasses.replace(r, key=None),
        lambda r: dataclasses.replace(r, topic=REGISTRY),
        lambda r: dataclasses.replace(r, headers=((SIGNER_HEADER, b"agent-pool-b"), r.headers[1])),
    ],
    ids=["value", "key", "no key", "topic", "signer"],
)
def test_a_changed_value_key_topic_or_signer_fails(tamper: object) -> None:
    record = tamper(signed(heartbeat("gpu-a-2"), HEARTBEATS, "agent-pool-a"))  # type: ignore[operator]
    refused = TRUST.refusal(record, heartbeat("gpu-a-2"))
    assert refused is not None and refused.kind in ("bad-signature", "over-claim")


@pytest.mark.parametrize(
    ("headers", "kind"),
    [
        ((), "unsigned"),
        (((SIGNATURE_HEADER, b"x" * 64),), "unsigned"),
        (((SIGNER_HEADER, b"agent-pool-a"),), "bad-signature"),
    ],
)
def test_missing_headers_fail(headers: tuple[tuple[str, bytes], ...], kind: str) -> None:
    record = dataclasses.replace(signed(heartbeat("gpu-a-2"), HEARTBEATS, "agent-pool-a"), headers=headers)
    refused = TRUST.refusal(record, heartbeat("gpu-a-2"))
    assert refused is not None and refused.kind == kind


def test_a_record_signed_by_another_agent_for_this_one_is_rejected_at_its_coordinates() -> None:
    record = signed(heartbeat("gpu-a-2"), HEARTBEATS, "agent-pool-b")
    with pytest.raises(SignatureRejected, match=r"swarm.agents.heartbeats\[0\]@7 refused: over-claim") as raised:
        input_event(default_codec(), record, ["AgentHeartbeat"], TRUST)
    assert raised.value.refused.kind == "over-claim"


def test_missions_are_not_verified_and_no_trust_verifies_nothing() -> None:
    assert MISSIONS not in VERIFIED_TOPICS and {HEARTBEATS, INBOX, REGISTRY} <= VERIFIED_TOPICS
    unsigned = Record(HEARTBEATS, b"k", default_codec().encode(heartbeat("gpu-a-2")))
    assert input_event(default_codec(), unsigned, ["AgentHeartbeat"]) == heartbeat("gpu-a-2")


@given(topic=st.text(min_size=1, max_size=40), key=st.none() | st.binary(max_size=64), value=st.binary(max_size=512))
def test_signing_then_verifying_any_record_succeeds(topic: str, key: bytes | None, value: bytes) -> None:
    headers = Signer("agent-pool-a", KEYS["agent-pool-a"]).headers(topic, key, value)
    record = Record(topic, key, value, tuple(headers))
    assert TRUST.refusal(record, heartbeat("gpu-a-1")) is None


@given(value=st.binary(min_size=1, max_size=256), data=st.data())
def test_any_single_byte_changed_fails(value: bytes, data: st.DataObject) -> None:
    record = Record(HEARTBEATS, b"gpu-a-1", value)
    record = dataclasses.replace(
        record,
        headers=tuple(Signer("agent-pool-a", KEYS["agent-pool-a"]).headers(record.topic, record.key, record.value)),
    )
    index = data.draw(st.integers(0, len(value) - 1))
    flip = data.draw(st.integers(1, 255))
    changed = dataclasses.replace(record, value=value[:index] + bytes([value[index] ^ flip]) + value[index + 1 :])
    refused = TRUST.refusal(changed, heartbeat("gpu-a-1"))
    assert refused is not None and refused.kind == "bad-signature"


# Keys and the trust file.


def test_keys_generate_writes_a_key_whose_entry_the_trust_file_takes(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        app, ["keys", "generate", "--principal", "pool-a", "--out", str(tmp_path), "--claim", "gpu-a-*"]
    )
    assert result.exit_code == 0, result.output
    (tmp_path / "trust.toml").write_text(result.output)
    settings = Settings(
        signing_key_file=tmp_path / "pool-a.pem", signing_principal="pool-a", signing_trust_file=tmp_path / "trust.toml"
    )
    signer = signer_for(settings)
    assert signer is not None and (tmp_path / "pool-a.pem").stat().st_mode & 0o777 == 0o600
    trust = load_trust(tmp_path / "trust.toml")
    assert trust.principals["pool-a"] == Principal("pool-a", "agent", ("gpu-a-*",))
    value = default_codec().encode(heartbeat("gpu-a-3"))
    record = Record(HEARTBEATS, b"gpu-a-3", value, tuple(signer.headers(HEARTBEATS, b"gpu-a-3", value)))
    assert trust.refusal(record, heartbeat("gpu-a-3")) is None
    again = CliRunner().invoke(app, ["keys", "generate", "--principal", "pool-a", "--out", str(tmp_path)])
    assert again.exit_code == 3 and "exists" in again.output


def test_a_key_the_trust_file_does_not_list_is_a_configuration_error(tmp_path: Path) -> None:
    CliRunner().invoke(app, ["keys", "generate", "--principal", "pool-a", "--out", str(tmp_path)])
    (tmp_path / "trust.toml").write_text(trust_entry("pool-a", "agent", ["*"], Ed25519PrivateKey.generate()))
    settings = Settings(
        signing_key_file=tmp_path / "pool-a.pem", signing_principal="pool-a", signing_trust_file=tmp_path / "trust.toml"
    )
    with pytest.raises(ConfigError, match="no entry with this key's public key"):
        signer_for(settings)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[principals.x]\nrole = 'king'\npublic_key = 'AA=='\n", "role 'king'"),
        ("[principals.x]\nrole = 'agent'\nclaims = 'gpu-*'\npublic_key = 'AA=='\n", "needs claims"),
        ("[principals.x]\nrole = 'agent'\npublic_key = 'AA=='\n", "no base64 Ed25519 public_key"),
        ("[principals.x\n", "cannot be read as TOML"),
        ("principals = 5\n", "each principal is a table"),
    ],
)
def test_a_wrong_trust_file_says_what_is_wrong(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "trust.toml").write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_trust(tmp_path / "trust.toml")


def test_settings_need_key_and_principal_together(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="both SWARMLOG_SIGNING_KEY_FILE and SWARMLOG_SIGNING_PRINCIPAL"):
        Settings(signing_principal="pool-a")
    with pytest.raises(ConfigError, match="not a readable file"):
        Settings(signing_trust_file=tmp_path / "missing.toml")
    env = {"SWARMLOG_SIGNING_TRUST_FILE": str(tmp_path)}
    with pytest.raises(ConfigError):
        Settings.from_env(env)
