"""Ed25519 signatures in record headers: a process signs what it writes, readers verify it against the trust file.

A record's signature covers its topic, key and value (canonical_bytes), so it cannot be moved to another topic or
key, and names its signer, a principal of the trust file: its public key and what it may claim (swarmlog.claims).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import struct
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from swarmlog.claims import Principal, Refused, Role, verdict
from swarmlog.errors import ConfigError, DecodeError
from swarmlog.schemas.events import Event
from swarmlog.settings import Settings

SIGNER_HEADER = "swarmlog-signer"
SIGNATURE_HEADER = "swarmlog-signature"
DOMAIN = b"swarmlog-signature-v1\0"
"""Prefix of every signed byte string: a swarmlog record signature is never valid as anything else."""
SIGNATURE_BYTES = 64
NO_KEY = 0xFFFF_FFFF
"""The length written for a record without a key (an empty key is length 0)."""
Headers = list[tuple[str, bytes]]


class SignatureRejected(DecodeError):
    """A record that decodes but is not taken as its signer's: unsigned, unknown signer, bad signature, over-claim."""

    def __init__(self, refused: Refused, *, topic: str, partition: int, offset: int) -> None:
        self.refused = refused
        super().__init__(str(refused), topic=topic, partition=partition, offset=offset)

    def _describe(self) -> str:
        return f"record at {self.topic}[{self.partition}]@{self.offset} refused: {self.reason}"


def canonical_bytes(topic: str, key: bytes | None, value: bytes) -> bytes:
    """What a record's signature covers: the domain, then topic, key and value, each after its 4-byte length."""
    parts = [DOMAIN, struct.pack(">I", len(topic.encode())), topic.encode()]
    parts += [struct.pack(">I", NO_KEY)] if key is None else [struct.pack(">I", len(key)), key]
    return b"".join([*parts, struct.pack(">I", len(value)), value])


@dataclasses.dataclass(frozen=True)
class Signer:
    """A principal's private key: the headers that sign a record as its."""

    principal: str
    key: Ed25519PrivateKey

    @property
    def overhead_bytes(self) -> int:
        """An upper bound on the bytes the headers add to a record: names, values and their four length varints."""
        return len(SIGNER_HEADER) + len(self.principal.encode()) + len(SIGNATURE_HEADER) + SIGNATURE_BYTES + 4 * 5

    def headers(self, topic: str, key: bytes | None, value: bytes) -> Headers:
        """The signer and signature headers of a record of `topic` with `key` and `value`."""
        signature = self.key.sign(canonical_bytes(topic, key, value))
        return [(SIGNER_HEADER, self.principal.encode()), (SIGNATURE_HEADER, signature)]


@dataclasses.dataclass(frozen=True)
class Trust:
    """The trust file: each principal's public key and claims."""

    principals: Mapping[str, Principal]
    keys: Mapping[str, Ed25519PublicKey]

    def refusal(self, record: Any, event: Event) -> Refused | None:
        """Why `record` (decoded into `event`) is not its signer's to write; None when it is."""
        signer, signature = signature_of(record.headers)
        public = self.keys.get(signer or "")
        valid = public is not None and signature is not None and _verifies(public, signature, record)
        return verdict(event, signer, valid, self.principals)

    def check(self, record: Any, event: Event) -> None:
        """Raise SignatureRejected at the record's coordinates unless its signer may have written `event`."""
        refused = self.refusal(record, event)
        if refused is not None:
            raise SignatureRejected(refused, topic=record.topic, partition=record.partition, offset=record.offset)


def _verifies(public: Ed25519PublicKey, signature: bytes, record: Any) -> bool:
    """Whether `signature` is the key's over the record's topic, key and value."""
    try:
        public.verify(signature, canonical_bytes(record.topic, record.key, record.value or b""))
    except InvalidSignature:
        return False
    return True


def signature_of(headers: Sequence[tuple[str, bytes]] | None) -> tuple[str | None, bytes | None]:
    """The signer and signature a record's headers carry (None for either that is missing or unreadable)."""
    found = dict(headers or ())
    signer = found.get(SIGNER_HEADER)
    try:
        name = None if signer is None else bytes(signer).decode()
    except UnicodeDecodeError:
        name = None
    signature = found.get(SIGNATURE_HEADER)
    return name, None if signature is None else bytes(signature)


def load_signer(key_file: Path, principal: str) -> Signer:
    """The signer of `principal` from its PEM Ed25519 private key file, or a ConfigError naming the file."""
    try:
        key = serialization.load_pem_private_key(key_file.read_bytes(), password=None)
    except (OSError, ValueError, TypeError) as exc:
        raise ConfigError(f"SWARMLOG_SIGNING_KEY_FILE={key_file} is not a readable PEM private key: {exc}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise ConfigError(f"SWARMLOG_SIGNING_KEY_FILE={key_file} holds a {type(key).__name__}; it must be Ed25519")
    return Signer(principal, key)


def load_trust(path: Path) -> Trust:
    """The trust file (TOML: one [principals.NAME] table each, with role, claims and public_key), or a ConfigError
    saying which entry is wrong and how."""
    where = f"SWARMLOG_SIGNING_TRUST_FILE={path}"
    try:
        tables = tomllib.loads(path.read_text(encoding="utf-8")).get("principals", {})
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{where} cannot be read as TOML: {exc}") from None
    principals: dict[str, Principal] = {}
    keys: dict[str, Ed25519PublicKey] = {}
    if not isinstance(tables, dict) or not all(isinstance(entry, dict) for entry in tables.values()):
        raise ConfigError(f"{where}: each principal is a table, [principals.NAME] with role, claims and public_key")
    for name, entry in tables.items():
        role, claims, public = entry.get("role"), entry.get("claims", []), entry.get("public_key")
        if role not in get_args(Role):
            raise ConfigError(f"{where}: principal {name!r} has role {role!r}; use one of {', '.join(get_args(Role))}")
        if not isinstance(claims, list) or not all(isinstance(claim, str) for claim in claims):
            raise ConfigError(f'{where}: principal {name!r} needs claims = ["pattern", ...] (agent ids or regions)')
        try:
            keys[name] = Ed25519PublicKey.from_public_bytes(base64.b64decode(str(public), validate=True))
        except ValueError as exc:
            raise ConfigError(f"{where}: principal {name!r} has no base64 Ed25519 public_key ({exc})") from None
        principals[name] = Principal(name, role, tuple(claims))
    return Trust(principals, keys)


def public_text(key: Ed25519PrivateKey) -> str:
    """The base64 of a private key's raw 32-byte public key, as the trust file holds it."""
    return base64.b64encode(key.public_key().public_bytes_raw()).decode()


def trust_entry(principal: str, role: Role, claims: Sequence[str], key: Ed25519PrivateKey) -> str:
    """The trust file's TOML table for a principal."""
    listed = ", ".join(json.dumps(claim) for claim in claims)
    return (
        f"[principals.{json.dumps(principal)}]\nrole = {json.dumps(role)}\nclaims = [{listed}]\n"
        f"public_key = {json.dumps(public_text(key))}\n"
    )


def generate(principal: str, role: Role, claims: Sequence[str], out: Path) -> tuple[Path, str]:
    """Write a new Ed25519 private key for `principal` to out/<principal>.pem (mode 0600, never overwritten); its path
    and its trust entry."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{principal}.pem"
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise ConfigError(f"{path} exists; remove it or choose another --out to make a new key") from None
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(pem)
    return path, trust_entry(principal, role, claims, key)


def signer_for(settings: Settings) -> Signer | None:
    """The process's signer when SWARMLOG_SIGNING_KEY_FILE is set (its public key checked against its trust entry
    when there is a trust file), else None: it writes unsigned records."""
    if settings.signing_key_file is None or settings.signing_principal is None:
        return None
    signer = load_signer(settings.signing_key_file, settings.signing_principal)
    trust = trust_for(settings)
    known = None if trust is None else trust.keys.get(signer.principal)
    if trust is not None and (known is None or known.public_bytes_raw() != signer.key.public_key().public_bytes_raw()):
        raise ConfigError(
            f"SWARMLOG_SIGNING_PRINCIPAL={signer.principal} has no entry with this key's public key in "
            f"SWARMLOG_SIGNING_TRUST_FILE={settings.signing_trust_file}; add the one `swarmlog keys generate` printed"
        )
    return signer


def trust_for(settings: Settings) -> Trust | None:
    """The trust file's principals when SWARMLOG_SIGNING_TRUST_FILE is set (readers then verify), else None."""
    return None if settings.signing_trust_file is None else load_trust(settings.signing_trust_file)
