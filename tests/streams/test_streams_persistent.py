"""The persistent structures behave as the dict, frozenset and pruned dict they replace, and never change in place."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from swarmlog.streams.budgets import AgentUsage
from swarmlog.streams.persistent import PMap, PSet, TimedMap, replace
from swarmlog.streams.registry import AgentView

KEYS = st.text(max_size=3)
MAP_STEPS = st.lists(st.tuples(st.booleans(), KEYS, st.integers()), max_size=200)


@settings(max_examples=200, deadline=None)
@given(MAP_STEPS)
def test_a_pmap_is_the_dict_it_was_built_like(steps):
    plain, persistent, history = {}, PMap(), []
    for put, key, value in steps:
        history.append((persistent, dict(plain)))
        if put:
            plain[key], persistent = value, persistent.set(key, value)
        else:
            plain.pop(key, None)
            persistent = persistent.delete(key)
        assert persistent == plain and len(persistent) == len(plain)
    assert all(earlier == snapshot for earlier, snapshot in history)
    assert pickle.loads(pickle.dumps(persistent)) == plain and sorted(persistent) == sorted(plain)


@given(st.lists(KEYS, max_size=100))
def test_a_pset_is_the_frozenset_it_was_built_like(items):
    persistent = PSet()
    for item in items:
        persistent = persistent.add(item)
    assert persistent == frozenset(items) and frozenset(items) == persistent
    assert pickle.loads(pickle.dumps(persistent)) == frozenset(items)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), KEYS, st.integers(0, 1000)), max_size=300))
def test_a_timed_map_expires_like_a_pruned_dict(steps):
    plain, timed, history = {}, TimedMap(), []
    for expire, key, at in steps:
        history.append((timed, dict(plain)))
        if expire:
            plain, timed = {k: when for k, when in plain.items() if when >= at}, timed.expire(at)
        else:
            plain[key], timed = at, timed.set(key, at)
        assert timed == plain and len(timed) == len(plain)
    assert all(earlier == snapshot for earlier, snapshot in history)
    assert pickle.loads(pickle.dumps(timed)) == plain


def test_replace_is_named_tuple_replace_and_names_an_unknown_field():
    view = AgentView("a", ("code",), "m", "b", "n", None, "r", 0, 1, "reg", 5, 6)
    changes = {"last_heartbeat_ms": 9, "status": "BUSY"}
    replaced = replace(view, **changes)
    assert type(replaced) is AgentView and replaced == view._replace(**changes) and view.last_heartbeat_ms == 6
    assert replace(view, status="IDLE", last_heartbeat_ms=9) == view._replace(status="IDLE", last_heartbeat_ms=9)
    with pytest.raises(TypeError, match=r"no field.*colour"):
        replace(view, colour="red")


def test_replace_is_dataclasses_replace_for_a_dataclass_record():
    usage = AgentUsage(window_start=5, used=7)
    assert replace(usage, used=9, window_start=6) == dataclasses.replace(usage, used=9, window_start=6)
    with pytest.raises(TypeError, match=r"no field.*colour"):
        replace(usage, colour="red")
