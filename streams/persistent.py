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
import functools
import itertools
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Set
from typing import Any

BITS, WIDTH, LEAF, DEEPEST = 5, 32, 16, 64
CHUNK = 64
MASK = WIDTH - 1
_MISSING: Any = object()

Node = dict | tuple | None


class PMap(Mapping):
    """An immutable mapping whose `set` and `delete` return a new map sharing all but one path with this one."""

    __slots__ = ("_root", "_size")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, items: Mapping | Iterable[tuple[Hashable, Any]] = ()) -> None:
        root, size = None, 0
        for key, value in items.items() if isinstance(items, Mapping) else items:
            root, added = _set(root, key, value, hash(key), 0)
            size += added
        self._root, self._size = root, size

    @classmethod
    def of(cls, items: Mapping) -> PMap:
        """`items` itself when already a PMap, else a PMap of its entries (a state built from a plain dict)."""
        return items if isinstance(items, PMap) else cls(items)

    def _with(self, root: Node, size: int) -> PMap:
        new = object.__new__(PMap)
        new._root, new._size = root, size
        return new

    def __getitem__(self, key: Hashable) -> Any:
        value = _get(self._root, key, hash(key))
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value of `key`, or `default`."""
        value = _get(self._root, key, hash(key))
        return default if value is _MISSING else value

    def __contains__(self, key: object) -> bool:
        return _get(self._root, key, hash(key)) is not _MISSING

    def __iter__(self) -> Iterator:
        return _keys(self._root)

    def __len__(self) -> int:
        return self._size

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping) and len(other) != self._size:
            return False
        return Mapping.__eq__(self, other)

    def __repr__(self) -> str:
        return f"PMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple:
        return PMap, (dict(self.items()),)

    def set(self, key: Hashable, value: Any) -> PMap:
        """This map with `key` bound to `value`."""
        root, added = _set(self._root, key, value, hash(key), 0)
        return self._with(root, self._size + added)

    def delete(self, key: Hashable) -> PMap:
        """This map without `key` (itself when `key` is absent)."""
        h = hash(key)
        if _get(self._root, key, h) is _MISSING:
            return self
        return self._with(_delete(self._root, key, h, 0), self._size - 1)


class PSet(Set):
    """An immutable set whose `add` returns a new set sharing almost everything with this one."""

    __slots__ = ("_map",)
    __hash__ = Set._hash

    def __init__(self, items: Iterable[Hashable] = ()) -> None:
        self._map = items._map if isinstance(items, PSet) else PMap((item, True) for item in items)

    def __contains__(self, item: object) -> bool:
        return item in self._map

    def __iter__(self) -> Iterator:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __repr__(self) -> str:
        return f"PSet({set(self)!r})"

    def __reduce__(self) -> tuple:
        return PSet, (frozenset(self),)

    def add(self, item: Hashable) -> PSet:
        """This set with `item`."""
        if item in self._map:
            return self
        new = object.__new__(PSet)
        new._map = self._map.set(item, True)
        return new


def replace(record: Any, **changes: Any) -> Any:
    """`dataclasses.replace` (or a named tuple's `_replace`) for a fold's records, by a constructor call written once
    per set of changes."""
    return _replacer(type(record), tuple(changes))(record, changes)


@functools.cache
def _replacer(cls: type, changed: tuple[str, ...]) -> Callable[[Any, dict[str, Any]], Any]:
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
    scope = {"cls": cls, "new": tuple.__new__}
    exec(f"def replaced(r, c):\n    return {build}", scope)
    return scope["replaced"]


def _get(node: Node, key: object, h: int) -> Any:
    shift = 0
    while type(node) is tuple:
        node = node[(h >> shift) & MASK]
        shift += BITS
    return _MISSING if node is None else node.get(key, _MISSING)


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


def _split(leaf: dict, shift: int) -> tuple:
    """A full leaf as a branch whose children are leaves by the next bits of the hash."""
    children: list[dict | None] = [None] * WIDTH
    for key, value in leaf.items():
        index = (hash(key) >> shift) & MASK
        if children[index] is None:
            children[index] = {}
        children[index][key] = value
    return tuple(children)


def _delete(node: Node, key: Hashable, h: int, shift: int) -> Node:
    """The node without `key`, which it holds; None when nothing is left."""
    if type(node) is dict:
        leaf = node.copy()
        del leaf[key]
        return leaf or None
    index = (h >> shift) & MASK
    branch = (*node[:index], _delete(node[index], key, h, shift + BITS), *node[index + 1 :])
    return branch if any(child is not None for child in branch) else None


def _keys(node: Node) -> Iterator:
    if type(node) is dict:
        yield from node
    elif node is not None:
        for child in node:
            if child is not None:
                yield from _keys(child)


class TimedMap(Mapping):
    """A persistent map of entries that each have a time, which drops the entries older than a horizon without
    looking at the others. An entry's time is its value, or `time_of(value)` where that is given."""

    __slots__ = ("_chunks", "_map", "_time_of")
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self, items: Mapping[Hashable, Any] | None = None, time_of: Callable[[Any], int] | None = None
    ) -> None:
        self._time_of = time_of
        items = items or {}
        entries = sorted((self._time(value), key) for key, value in items.items())
        self._map = PMap((key, items[key]) for _, key in entries)
        self._chunks = tuple(tuple(entries[i : i + CHUNK]) for i in range(0, len(entries), CHUNK))

    @classmethod
    def of(cls, items: Mapping[Hashable, Any], time_of: Callable[[Any], int] | None = None) -> TimedMap:
        """`items` itself when already a TimedMap, else a TimedMap of its entries."""
        return items if isinstance(items, TimedMap) else cls(items, time_of)

    def _time(self, value: Any) -> int:
        return value if self._time_of is None else self._time_of(value)

    def _with(self, entries: PMap, chunks: tuple) -> TimedMap:
        new = object.__new__(TimedMap)
        new._map, new._chunks, new._time_of = entries, chunks, self._time_of
        return new

    def __getitem__(self, key: Hashable) -> Any:
        return self._map[key]

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __iter__(self) -> Iterator:
        return iter(self._map)

    def __len__(self) -> int:
        return len(self._map)

    def __eq__(self, other: object) -> bool:
        return self._map == other._map if isinstance(other, TimedMap) else self._map == other

    def __repr__(self) -> str:
        return f"TimedMap({dict(self.items())!r})"

    def __reduce__(self) -> tuple:
        return TimedMap, (dict(self.items()), self._time_of)

    def oldest(self) -> Iterator:
        """The keys from the oldest time on (ties by key)."""
        return (key for chunk in self._chunks for _, key in chunk)

    def before(self, horizon: int) -> Iterator:
        """The keys whose time is before `horizon`, oldest first: those `expire(horizon)` drops."""
        entries = (entry for chunk in self._chunks for entry in chunk)
        return (key for _, key in itertools.takewhile(lambda entry: entry[0] < horizon, entries))

    def set(self, key: Hashable, value: Any) -> TimedMap:
        """This map with `key` bound to `value`."""
        chunks = self._chunks
        if key in self._map:
            chunks = _remove(chunks, (self._time(self._map[key]), key))
        return self._with(self._map.set(key, value), _insert(chunks, (self._time(value), key)))

    def delete(self, key: Hashable) -> TimedMap:
        """This map without `key` (itself when `key` is absent)."""
        if key not in self._map:
            return self
        return self._with(self._map.delete(key), _remove(self._chunks, (self._time(self._map[key]), key)))

    def expire(self, horizon: int) -> TimedMap:
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


def _insert(chunks: tuple, entry: tuple) -> tuple:
    """Sorted chunks with `entry` in its place; a chunk grown to twice CHUNK is split in two."""
    if not chunks:
        return ((entry,),)
    index = min(bisect.bisect_left(chunks, entry, key=_last), len(chunks) - 1)
    chunk = chunks[index]
    at = bisect.bisect_left(chunk, entry)
    chunk = (*chunk[:at], entry, *chunk[at:])
    split = (chunk,) if len(chunk) < 2 * CHUNK else (chunk[:CHUNK], chunk[CHUNK:])
    return chunks[:index] + split + chunks[index + 1 :]


def _remove(chunks: tuple, entry: tuple) -> tuple:
    """Sorted chunks without `entry`, which they hold; an emptied chunk is dropped."""
    index = bisect.bisect_left(chunks, entry, key=_last)
    chunk = chunks[index]
    at = bisect.bisect_left(chunk, entry)
    chunk = chunk[:at] + chunk[at + 1 :]
    return chunks[:index] + ((chunk,) if chunk else ()) + chunks[index + 1 :]


def _last(chunk: tuple) -> tuple:
    return chunk[-1]
