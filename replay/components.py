"""Every replayable component: its source topics, initial state, the live process's own `evolve`, and a JSON view."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Any, Literal

import msgspec

from swarmlog.actors import domain as agent
from swarmlog.coordinator import PROJECTION as COORDINATOR
from swarmlog.coordinator import Config, State, top
from swarmlog.schemas.events import Event
from swarmlog.schemas.projection import Projection
from swarmlog.schemas.records import MissionRetired
from swarmlog.streams import budgets, registry, waitgraph

KeyKind = Literal["region", "agent", "mission"]


@dataclasses.dataclass(frozen=True)
class Component:
    """A state the replay can rebuild: its projection (topics, initial state, the very live `evolve`), how a replay
    key picks its instance (`start(key, regions)`), and how it is shown and compared with its live table."""

    name: str
    doc: str
    projection: Projection[Any, Any]
    start: Callable[[str, tuple[str, ...]], Any]
    key: KeyKind | None = None
    table: str | None = None
    """The Faust table that holds it live, if any."""
    from_table: Callable[[Mapping[str, Any]], Any] | None = None
    """The state that table's values (by table key) make up: the live side of a diff."""
    rows: Callable[[Any], Mapping[str, Any]] | None = None
    """A state's table rows, where that table is partitioned like its topics: its entries expire on their own
    partition's event time, so each partition folds on its own and their rows make up the state (`from_table`)."""

    @property
    def topics(self) -> tuple[str, ...]:
        """The topics its projection folds."""
        return self.projection.topics

    @property
    def evolve(self) -> Callable[[Any, Event], Any]:
        """Its projection's fold of one event."""
        return self.projection.evolve

    def fold(self, state: Any, events: Iterable[Event]) -> Any:
        """The state after `events` in order."""
        return self.projection.fold(state, events)

    def partitions(self, key: str | None, regions: tuple[str, ...]) -> tuple[int, ...] | None:
        """The source partitions (None: all): a region's coordinator reads its own journal partition only."""
        return (regions.index(key or regions[0]),) if self.key == "region" else None

    def resolve(self, key: str | None, regions: tuple[str, ...]) -> str:
        """The instance `key` names (region-0 for an unnamed region); ValueError when a required key is missing."""
        if self.key == "region":
            region = key or regions[0]
            if region not in regions:
                raise ValueError(f"unknown region {region!r}; the regions are {', '.join(regions)}")
            return region
        if self.key is not None and not key:
            raise ValueError(f"{self.name} needs --key <{self.key} id>")
        return key or ""

    def view(self, state: Any, key: str | None = None) -> dict[str, Any]:
        """The state as flat JSON entries (`agents/<id>`, `queue`, …), narrowed to `key` where it is a filter."""
        if self.key == "mission":
            return _mission_view(state, key or "")
        entries = flat(state)
        if self.key is None and key:
            return {name: value for name, value in entries.items() if name.rsplit("/", 1)[-1] == key}
        return entries


def _coordinator(region: str, regions: tuple[str, ...]) -> State:
    return COORDINATOR.initial(Config(region, regions))


def _swarm(_: str, regions: tuple[str, ...]) -> State:
    """Every region's journal in one state: regions share no mission and no agent, so their folds do not meet."""
    return COORDINATOR.initial(Config(regions[0], regions))


def _keeping_retired(state: State, event: Event) -> State:
    """The coordinator's fold, but a retired mission stays: this view is for looking at one mission after the fact."""
    return state if isinstance(event, MissionRetired) else COORDINATOR.evolve(state, event)


MISSIONS_KEPT = dataclasses.replace(COORDINATOR, name="mission", evolve=_keeping_retired)
"""The coordinators' projection over the whole journal, keeping the missions it retires."""


def _mission_view(state: State, mission_id: str) -> dict[str, Any]:
    mission = state.missions.get(mission_id)
    if mission is None:
        return {}
    agents = {
        f"agents/{agent_id}": jsonable(state.agents[agent_id])
        for agent_id in sorted(mission.agents)
        if agent_id in state.agents
    }
    return {"mission": jsonable(mission), **agents}


COMPONENTS: dict[str, Component] = {
    component.name: component
    for component in (
        Component(
            "coordinator",
            "one region's coordinator: the fold of its journal partition",
            COORDINATOR,
            _coordinator,
            key="region",
        ),
        Component(
            "mission",
            "one mission as the coordinators see it (the whole journal)",
            MISSIONS_KEPT,
            _swarm,
            key="mission",
        ),
        Component(
            "registry",
            "the agent registry and liveness (Faust table `registry`)",
            registry.PROJECTION,
            lambda *_: registry.PROJECTION.initial(None),
            table="registry",
            from_table=lambda table: registry.Registry(dict(table)),
            rows=lambda state: state.agents,
        ),
        Component(
            "waitgraph",
            "the wait-for graph and reported deadlocks (Faust table `waitgraph`)",
            waitgraph.PROJECTION,
            lambda *_: waitgraph.PROJECTION.initial(None),
            table="waitgraph",
            from_table=waitgraph.from_entries,
        ),
        Component(
            "budgets",
            "token usage per agent per window (Faust table `budgets`; the window is the last BudgetWindowSet)",
            budgets.PROJECTION,
            lambda *_: budgets.PROJECTION.initial(None),
            table="budgets",
            from_table=lambda table: budgets.Budgets(dict(table)),
            rows=lambda state: state.agents,
        ),
        Component(
            "agent",
            "one agent's task state (its rocksdict checkpoint)",
            agent.PROJECTION,
            lambda agent_id, _: agent.PROJECTION.initial(agent_id),
            key="agent",
        ),
        Component(
            "top",
            "the top level: missions split across regions, their shares and where they run (swarm.top.journal)",
            top.PROJECTION,
            lambda *_: top.PROJECTION.initial(top.Config()),
        ),
    )
}


def component(name: str) -> Component:
    """The component called `name`; ValueError listing the known ones."""
    try:
        return COMPONENTS[name]
    except KeyError:
        raise ValueError(f"unknown component {name!r}; known: {', '.join(COMPONENTS)}") from None


def flat(state: Any) -> dict[str, Any]:
    """A dataclass state's fields as JSON entries; a mapping field becomes one entry per key (`field/key`)."""
    entries: dict[str, Any] = {}
    for field in dataclasses.fields(state):
        value = getattr(state, field.name)
        if isinstance(value, Mapping):
            entries.update({f"{field.name}/{_name(key)}": jsonable(item) for key, item in value.items()})
        else:
            entries[field.name] = jsonable(value)
    return dict(sorted(entries.items()))


def jsonable(value: Any) -> Any:
    """A stable JSON-able form: dataclasses, structs, named tuples as objects, sets sorted, tuple keys joined by `/`."""
    if isinstance(value, msgspec.Struct):
        return jsonable(msgspec.structs.asdict(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {field.name: jsonable(getattr(value, field.name)) for field in dataclasses.fields(value)}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # a named tuple record
        return {name: jsonable(item) for name, item in zip(value._fields, value, strict=False)}
    if isinstance(value, Mapping):
        return {_name(key): jsonable(item) for key, item in sorted(value.items(), key=lambda kv: _name(kv[0]))}
    if isinstance(value, Set):
        return sorted((jsonable(item) for item in value), key=canonical)
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, bytes):
        return value.hex()
    return value


def canonical(value: Any) -> str:
    """The canonical JSON text of a JSON-able value (sorted keys, no spaces): what determinism compares."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _name(key: Any) -> str:
    """A mapping key as an entry name."""
    return "/".join(map(str, key)) if isinstance(key, tuple) else str(key)
