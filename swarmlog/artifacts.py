"""The artifact store: content-addressed bytes behind one small interface; a blob directory is its implementation.

Artifacts are kept as long as the events that reference them (the journal is kept forever): nothing here expires.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Protocol

from swarmlog.errors import SwarmlogError
from swarmlog.schemas.artifacts import ArtifactRef, parse
from swarmlog.settings import Settings


class ArtifactError(SwarmlogError):
    """An artifact an event references cannot be read: missing or corrupt."""

    def __init__(self, ref: ArtifactRef, problem: str) -> None:
        self.ref = ref
        super().__init__(f"artifact {ref} {problem}")


class ArtifactMissing(ArtifactError):
    """No artifact with that hash in the store: it was never stored there, or the store is not the writers'."""


class ArtifactCorrupt(ArtifactError):
    """The stored bytes do not have the hash or size the reference names."""


class ArtifactStore(Protocol):
    """Content-addressed bytes: putting the same bytes twice stores them once; reading checks them."""

    def put(self, data: bytes) -> ArtifactRef:
        """Store the bytes (idempotent) and return their reference."""

    def get(self, ref: ArtifactRef) -> bytes:
        """The bytes of `ref`; ArtifactMissing or ArtifactCorrupt when they cannot be read as stored."""

    def location(self, ref: ArtifactRef) -> str:
        """Where a user finds the artifact: a path, or a URL."""


class BlobDirectory:
    """Artifacts as files named by their hash (`<root>/<first 2 hex digits>/<hex>`), written atomically."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, ref: ArtifactRef) -> Path:
        """Where the artifact's file is (or would be)."""
        return self.root / ref.sha256[:2] / ref.sha256

    def put(self, data: bytes) -> ArtifactRef:
        """Write the bytes unless a file of that hash and size is there already."""
        ref = ArtifactRef.of(data)
        target = self.path(ref)
        if target.is_file() and target.stat().st_size == ref.size:
            return ref
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=target.parent, prefix=".put-", delete=False) as temporary:
            temporary.write(data)
            temporary.flush()
            os.fsync(temporary.fileno())
        os.replace(temporary.name, target)  # readers see the whole file or none
        return ref

    def location(self, ref: ArtifactRef) -> str:
        """The artifact's file."""
        return str(self.path(ref))

    def get(self, ref: ArtifactRef) -> bytes:
        """The file's bytes, checked against the reference."""
        try:
            data = self.path(ref).read_bytes()
        except FileNotFoundError:
            raise ArtifactMissing(
                ref, f"is not in {self.root}; is SWARMLOG_ARTIFACTS_DIR the writers' store?"
            ) from None
        if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
            raise ArtifactCorrupt(ref, f"is corrupt in {self.path(ref)}: its bytes do not have the hash and size named")
        return data


def open_store(settings: Settings) -> BlobDirectory:
    """The store the settings name: SWARMLOG_ARTIFACTS_DIR, else `artifacts/` in the cache folder."""
    return BlobDirectory(settings.artifacts_dir or settings.cache_dir / "artifacts")


def shown(text: str, store: ArtifactStore) -> str:
    """An output as a user is shown it: its text, or a reference with where its artifact is, or why it cannot be read."""
    ref = parse(text)
    if ref is None:
        return text
    try:
        store.get(ref)
    except ArtifactError as exc:
        return f"{text} (unreadable: {exc})"
    return f"{text} ({ref.size} bytes at {store.location(ref)})"
