"""Persistent map, set and timed map, and record updates: values never mutated, where an update copies a few small nodes, not the whole.

A hash trie: a node is either a dict of at most LEAF entries or a tuple of WIDTH children chosen by 5 bits of the
key's hash. `set`/`delete` copy the path to one leaf (O(log n)), so a fold can keep every past state intact at no
O(n) cost per event. Equality is by content, so a PMap equals the dict (and a PSet the frozenset) it holds;
they pickle as that dict or frozenset, since string hashes differ between processes. A TimedMap also keeps its
keys sorted by their entries' times in chunks of CHUNK, so expiring the oldest costs what is dropped, not what is kept.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Set
from typing import Any, TypeAlias, TypeVar

BITS, WIDTH, LEAF, DEEPEST = 5, 32, 16, 64
CHUNK = 64
MASK = WIDTH - 1
_MISSING: Any = object()

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
T = TypeVar("T", bound=Hashable)
R = TypeVar("R")
Node: TypeAlias = "dict[Any, Any] | tuple[Node, ...] | None"
Entry: TypeAlias = tuple[int, Any]  # (time, key) of a TimedMap entry
Chunks: TypeAlias = tuple[tuple[Entry, ...], ...]
Replacer: TypeAlias = Callable[[R, dict[str, Any]], R]
_REPLACERS: dict[tuple[type[Any], tuple[str, ...]], Replacer[Any]] = {}


class PMap(Mapping[K, V]):
    """An immutable mapping whose `set` and `delete` return a new map sharing all but one path with this one."""

    __slots__ = ("_root", "_size")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = ()) -> None:
        root: Node = None
        size = 0
        for key, value in items.items() if isinstance(items, Mapping) else items:
            root, added = _set(root, key, value, hash(key), 0)
            size += added
        self._root, self._size = root, size

    @classmethod
    def of(cls, items: Mapping[K, V]) -> PMap[K, V]:
        """`items` itself when already a PMap, else a PMap of its entries (a state built from a plain dict)."""
        return items if isinstance(items, PMap) else cls(items)

    def _with(self, root: Node, size: int) -> PMap[K, V]:
        new: PMap[K, V] = object.__new__(PMap)
        new._root, new._size = root, size
        return new

    def __getitem__(self, key: K) -> V:
        value: V = _get(self._root, key, hash(key))
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: K, default: Any = None) -> Any:
        """The value of `key`, or `default`."""
        value = _get(self._root, key, hash(key))
        return default if value is _MISSING else value

    def __contains__(self, key: object) -> bool:
        return _get(self._root, key, hash(key)) is not _MISSING

    def __iter__(self) -> Iterator[K]:
        return _keys(self._root)

    def __len__(self) -> int:
        return self._size

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping) and len(other) != self._size:
            return False
        return Mapping.__eq__(self, other)

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[type[PMap[K, V]], tuple[dict[K, V]]]:
        return PMap, (dict(self.items()),)

    def set(self, key: K, value: V) -> PMap[K, V]:
        """This map with `key` bound to `value`."""
        root, added = _set(self._root, key, value, hash(key), 0)
        return self._with(root, self._size + added)

    def delete(self, key: K) -> PMap[K, V]:
        """This map without `key` (itself when `key` is absent)."""
        h = hash(key)
        if _get(self._root, key, h) is _MISSING:
            return self
        return self._with(_delete(self._root, key, h, 0), self._size - 1)


class PSet(Set[T]):
    """An immutable set whose `add` and `discard` return a new set sharing almost everything with this one."""

    __slots__ = ("_map",)
    __hash__ = Set._hash

    def __init__(self, items: Iterable[T] = ()) -> None:
        self._map: PMap[T, bool] = items._map if isinstance(items, PSet) else PMap((item, True) for item in items)

    def __contains__(self, item: object) -> bool:
        return item in self._map

    def __iter__(self) -> Iterator[T]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"PSet({set(self)!r})"

    def __reduce__(self) -> tuple[type[PSet[T]], tuple[frozenset[T]]]:
        return PSet, (frozenset(self),)

    def add(self, item: T) -> PSet[T]:
        """This set with `item`."""
        if item in self._map:
            return self
        return self._with(self._map.set(item, True))

    def discard(self, item: T) -> PSet[T]:
        """This set without `item` (itself when `item` is absent)."""
        return self._with(self._map.delete(item)) if item in self._map else self

    def _with(self, items: PMap[T, bool]) -> PSet[T]:
        new: PSet[T] = object.__new__(PSet)
        new._map = items
        return new


def replace(record: R, **changes: Any) -> R:
    """`dataclasses.replace` (or a named tuple's `_replace`) for a fold's records, by a constructor call written once
    per set of changes."""
    kind = type(record), tuple(changes)
    replaced: Replacer[R] | None = _REPLACERS.get(kind)
    if replaced is None:
        replaced = _REPLACERS[kind] = _replacer(*kind)
    return replaced(record, changes)


def _replacer(cls: type[Any], changed: tuple[str, ...]) -> Replacer[Any]:
    """`(record, changes) -> cls(...)` passing `changes[name]` for the changed fields and `record.name` for the rest."""
    is_tuple = issubclass(cls, tuple)
    names = list(cls._fields) if is_tuple else [field.name for field in dataclasses.fields(cls) if field.init]
    unknown = set(changed) - set(names)
    if unknown:
        raise TypeError(f"{cls.__name__} has no field(s) {', '.join(sorted(unknown))}")
    kept = "r[{}]" if is_tuple else "r.{}"
    arguments = ", ".join(
        f"c[{name!r}]" if name in changed else kept.format(i if is_tuple else name) for i, name in enumerate(names)
    )
    build = f"new(cls, ({arguments},))" if is_tuple else f"cls({arguments})"  # a named tuple without its __new__
    scope: dict[str, Any] = {"cls": cls, "new": tuple.__new__}
    exec(f"def replaced(r, c):\n    return {build}", scope)
    replaced: Replacer[Any] = scope["replaced"]
    return replaced


def _get(node: Node, key: object, h: int) -> Any:
    shift = 0
    while node is not None:
        if type(node) is dict:
            return node.get(key, _MISSING)
        node = node[(h >> shift) & MASK]
        shift += BITS
    return _MISSING


def _set(node: Node, key: Hashable, value: Any, h: int, shift: int) -> tuple[Node, bool]:
    """The node with `key` set, and whether the key is new."""
    if node is None:
        return {key: value}, True
    if type(node) is dict:
        if key in node or len(node) < LEAF or shift >= DEEPEST:
            added = key not in node
            leaf = node.copy()
            leaf[key] = value
            return leaf, added
        node = _split(node, shift)
    index = (h >> shift) & MASK
    child, added = _set(node[index], key, value, h, shift + BITS)
    return (*node[:index], child, *node[index + 1 :]), added


def _split(leaf: dict[Any, Any], shift: int) -> tuple[Node, ...]:
    """A full leaf as a branch whose children are leaves by the next bits of the hash."""
    children: list[dict[Any, Any] | None] = [None] * WIDTH
    for key, value in leaf.items():
        index = (hash(key) >> shift) & MASK
        child = children[index]
        if child is None:
            child = children[index] = {}
        child[key] = value
    return tuple(children)


def _delete(node: Node, key: Hashable, h: int, shift: int) -> Node:
    """The node without `key`, which it holds; None when nothing is left."""
    if type(node) is dict:
        leaf = node.copy()
        del leaf[key]
        return leaf or None
    assert node is not None, "the node holds the key"
    index = (h >> shift) & MASK
    branch = (*node[:index], _delete(node[index], key, h, shift + BITS), *node[index + 1 :])
    return branch if any(child is not None for child in branch) else None


def _keys(node: Node) -> Iterator[Any]:
    if type(node) is dict:
        yield from node
    elif node is not None:
        for child in node:
            if child is not None:
                yield from _keys(child)


class TimedMap(Mapping[K, V]):
    """A persistent map of entries that each have a time, which drops the entries older than a horizon without
    looking at the others. An entry's time is its value, or `time_of(value)` where that is given."""

    __slots__ = ("_chunks", "_map", "_time_of")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, items: Mapping[K, V] | None = None, time_of: Callable[[V], int] | None = None) -> None:
        self._time_of = time_of
        items = items or {}
        entries = sorted((self._time(value), key) for key, value in items.items())
        self._map: PMap[K, V] = PMap((key, items[key]) for _, key in entries)
        self._chunks: Chunks = tuple(tuple(entries[i : i + CHUNK]) for i in range(0, len(entries), CHUNK))

    @classmethod
    def of(cls, items: Mapping[K, V], time_of: Callable[[V], int] | None = None) -> TimedMap[K, V]:
        """`items` itself when already a TimedMap, else a TimedMap of its entries."""
        return items if isinstance(items, TimedMap) else cls(items, time_of)

    def _time(self, value: V) -> int:
        if self._time_of is None:
            assert isinstance(value, int), "a TimedMap without time_of holds times"
            return value
        return self._time_of(value)

    def _with(self, entries: PMap[K, V], chunks: Chunks) -> TimedMap[K, V]:
        new: TimedMap[K, V] = object.__new__(TimedMap)
        new._map, new._chunks, new._time_of = entries, chunks, self._time_of
        return new

    def __getitem__(self, key: K) -> V:
        return self._map[key]

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __eq__(self, other: object) -> bool:
        return self._map == other._map if isinstance(other, TimedMap) else self._map == other

    def __repr__(self) -> str:
        return f"TimedMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple[type[TimedMap[K, V]], tuple[dict[K, V], Callable[[V], int] | None]]:
        return TimedMap, (dict(self.items()), self._time_of)

    def oldest(self) -> Iterator[K]:
        """The keys from the oldest time on (ties by key)."""
        return (key for chunk in self._chunks for _, key in chunk)

    def before(self, horizon: int) -> Iterator[K]:
        """The keys whose time is before `horizon`, oldest first: those `expire(horizon)` drops."""
        entries = (entry for chunk in self._chunks for entry in chunk)
        return (key for _, key in itertools.takewhile(lambda entry: entry[0] < horizon, entries))

    def set(self, key: K, value: V) -> TimedMap[K, V]:
        """This map with `key` bound to `value`."""
        chunks = self._chunks
        if key in self._map:
            chunks = remove_sorted(chunks, (self._time(self._map[key]), key))
        return self._with(self._map.set(key, value), insert_sorted(chunks, (self._time(value), key)))

    def delete(self, key: K) -> TimedMap[K, V]:
        """This map without `key` (itself when `key` is absent)."""
        if key not in self._map:
            return self
        return self._with(self._map.delete(key), remove_sorted(self._chunks, (self._time(self._map[key]), key)))

    def expire(self, horizon: int) -> TimedMap[K, V]:
        """This map without the entries whose time is before `horizon`."""
        chunks, entries = self._chunks, self._map
        if not chunks or chunks[0][0][0] >= horizon:
            return self
        gone = 0
        while gone < len(chunks) and chunks[gone][-1][0] < horizon:
            gone += 1
        dropped, kept = list(chunks[:gone]), chunks[gone:]
        if kept:
            cut = bisect.bisect_left(kept[0], (horizon,))
            dropped.append(kept[0][:cut])
            kept = (kept[0][cut:], *kept[1:])
        for chunk in dropped:
            for _, key in chunk:
                entries = entries.delete(key)
        return self._with(entries, kept)


def insert_sorted(chunks: Chunks, entry: Entry) -> Chunks:
    """Sorted chunks (of a TimedMap, or any chunked sorted entries) with `entry` in its place; a chunk grown to twice CHUNK is split in two."""
    if not chunks:
        return ((entry,),)
    index = min(bisect.bisect_left(chunks, entry, key=_last), len(chunks) - 1)
    chunk = chunks[index]
    at = bisect.bisect_left(chunk, entry)
    chunk = (*chunk[:at], entry, *chunk[at:])
    split = (chunk,) if len(chunk) < 2 * CHUNK else (chunk[:CHUNK], chunk[CHUNK:])
    return chunks[:index] + split + chunks[index + 1 :]


def remove_sorted(chunks: Chunks, entry: Entry) -> Chunks:
    """Sorted chunks without `entry`, which they hold; an emptied chunk is dropped."""
    index = bisect.bisect_left(chunks, entry, key=_last)
    chunk = chunks[index]
    at = bisect.bisect_left(chunk, entry)
    chunk = chunk[:at] + chunk[at + 1 :]
    return chunks[:index] + ((chunk,) if chunk else ()) + chunks[index + 1 :]


def _last(chunk: tuple[Entry, ...]) -> Entry:
    return chunk[-1]
