"""An in-process index of unit vectors with expiry: exact top-k by cosine in one matrix-vector product.

Rows live in one float32 matrix that doubles when full. A search masks expired rows; once they are a quarter of
the index they are evicted in one compaction, so the cost stays amortised and the matrix holds live memories.
"""

from __future__ import annotations

import dataclasses

import numpy as np

INITIAL_CAPACITY = 1024


@dataclasses.dataclass(frozen=True, slots=True)
class Hit:
    """One recalled memory and its cosine similarity to the query."""

    key: str
    content: str
    score: float


class VectorIndex:
    """Memories by key: a unit vector, the text it embeds, and when it expires (epoch ms)."""

    def __init__(self, dimension: int, capacity: int = INITIAL_CAPACITY) -> None:
        self.dimension = dimension
        self._vectors = np.zeros((capacity, dimension), np.float32)
        self._expire_at = np.zeros(capacity, np.int64)
        self._keys: list[str] = []
        self._contents: list[str] = []
        self._row_of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: str) -> bool:
        return key in self._row_of

    def add(self, key: str, vector: np.ndarray, content: str, expire_at_ms: int) -> None:
        """Insert or replace the memory under `key`."""
        row = self._row_of.get(key)
        if row is None:
            row = len(self._keys)
            if row == len(self._vectors):
                self._grow()
            self._keys.append(key)
            self._contents.append(content)
            self._row_of[key] = row
        else:
            self._contents[row] = content
        self._vectors[row] = vector
        self._expire_at[row] = expire_at_ms

    def search(self, query: np.ndarray, k: int, now_ms: int) -> list[Hit]:
        """The `k` live memories most similar to the unit vector `query`, best first."""
        size = len(self._keys)
        expired = self._expire_at[:size] <= now_ms
        if expired.sum() * 4 >= size > 0:
            self.evict(now_ms)
            size, expired = len(self._keys), np.zeros(len(self._keys), bool)
        if size == 0 or k <= 0:
            return []
        scores = self._vectors[:size] @ query.astype(np.float32, copy=False)
        scores[expired] = -np.inf
        top = np.argpartition(-scores, k - 1)[:k] if k < size else np.arange(size)
        best = top[np.argsort(-scores[top], kind="stable")]
        return [
            Hit(self._keys[row], self._contents[row], float(scores[row])) for row in best if np.isfinite(scores[row])
        ]

    def evict(self, now_ms: int) -> None:
        """Drop every memory expired by `now_ms`, compacting the rows."""
        size = len(self._keys)
        live = np.flatnonzero(self._expire_at[:size] > now_ms)
        count = len(live)
        self._vectors[:count] = self._vectors[live]
        self._expire_at[:count] = self._expire_at[live]
        self._keys = [self._keys[row] for row in live]
        self._contents = [self._contents[row] for row in live]
        self._row_of = {key: row for row, key in enumerate(self._keys)}

    def _grow(self) -> None:
        """Double the capacity."""
        size = len(self._vectors)
        vectors, expire_at = np.zeros((2 * size, self.dimension), np.float32), np.zeros(2 * size, np.int64)
        vectors[:size], expire_at[:size] = self._vectors, self._expire_at
        self._vectors, self._expire_at = vectors, expire_at
