"""The layer contract, checked statically over every module of every package, relative imports included.

Layers, outermost first; a module imports only from its own layer or the layers below it:

| layer    | modules                                                                                         |
|----------|-------------------------------------------------------------------------------------------------|
| entry    | swarmlog.launch, swarmlog.cli, swarmlog.__main__, swarmlog.commands                             |
| tools    | swarmlog.replay, swarmlog.client, swarmlog.services, swarmlog.console                           |
| shells   | every subpackage of a component (coordinator.shell, streams.app, actors.shell, brains, memory)  |
| adapters | every other module of the swarmlog package itself (kafka, settings, metrics, logs, ...)         |
| cores    | the modules directly in a component package (coordinator, streams, actors): folds and decisions |
| schemas  | swarmlog.schemas, swarmlog.topics (the wire contract: the events and the topics they travel on) |
| base     | swarmlog (the package's __init__), swarmlog.errors                                              |

A core module is also pure: it imports only the standard library's pure modules, msgspec, other cores, the
schemas' event classes, invariants and projection descriptor, and the topic names; and it reads no clock and draws no random number.
So is each module of PURE_TOOLS: the folds of a tool, kept apart from its I/O (they may import each other), and of
PURE_ADAPTERS: an adapter's decision, kept apart from its I/O (swarmlog.claims, beside swarmlog.kafka.signing).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "swarmlog": "swarmlog",
    "schemas": "swarmlog.schemas",
    "coordinator": "swarmlog.coordinator",
    "streams": "swarmlog.streams",
    "actors": "swarmlog.actors",
    "replay": "swarmlog.replay",
}
COMPONENTS = ("swarmlog.coordinator", "swarmlog.streams", "swarmlog.actors")
LAYERS = ("entry", "tools", "shells", "adapters", "cores", "schemas", "base")
ENTRY = ("swarmlog.launch", "swarmlog.cli", "swarmlog.__main__", "swarmlog.commands")
TOOLS = ("swarmlog.replay", "swarmlog.client", "swarmlog.services", "swarmlog.console")
BASE = ("swarmlog", "swarmlog.errors")
PURE_STDLIB = {
    "__future__",
    "abc",
    "bisect",
    "collections",
    "copy",
    "dataclasses",
    "enum",
    "functools",
    "hashlib",
    "heapq",
    "itertools",
    "json",
    "math",
    "operator",
    "re",
    "statistics",
    "string",
    "types",
    "typing",
    "zlib",
}
PURE_THIRD_PARTY = {"msgspec"}
PURE_SCHEMAS = {
    "swarmlog.schemas.events",
    "swarmlog.schemas.records",
    "swarmlog.schemas.invariants",
    "swarmlog.schemas.projection",
}
PURE_TOOLS = ("swarmlog.console.view", "swarmlog.console.pages")
PURE_ADAPTERS = ("swarmlog.claims",)
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "time_ns", "random", "uuid4"}


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _module_files() -> dict[str, Path]:
    """Every first-party module by its installed name."""
    modules = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            modules[".".join((package, *parts)).removesuffix(".__init__")] = path
    return modules


MODULES = _module_files()


def layer(module: str) -> str:
    """The layer a first-party module belongs to."""
    if module in BASE:
        return "base"
    if any(_within(module, entry) for entry in ENTRY):
        return "entry"
    if any(_within(module, tool) for tool in TOOLS):
        return "tools"
    if _within(module, "swarmlog.schemas") or module == "swarmlog.topics":
        return "schemas"
    for component in COMPONENTS:
        if _within(module, component):
            below = module.removeprefix(component).lstrip(".").split(".")[0]
            return "shells" if below and f"{component}.{below}" in PACKAGE_NAMES else "cores"
    return "adapters"


PACKAGE_NAMES = {name for name, path in MODULES.items() if path.name == "__init__.py"}


def imported_modules(module: str, source: str) -> Iterator[str]:
    """Every module `source` (the module `module`) imports, relative imports resolved to absolute names and
    `from package import module` named by the module."""
    package = module if module in PACKAGE_NAMES else module.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield full if full in MODULES else base


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of `tree` except those under `if TYPE_CHECKING:` (imports for annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            yield from (inner for branch in node.orelse for inner in ast.walk(branch))
            continue
        yield node
        yield from _runtime_nodes(node)


@functools.cache
def imports_of(module: str) -> frozenset[str]:
    """The modules a first-party module imports."""
    return frozenset(imported_modules(module, MODULES[module].read_text(encoding="utf-8")))


def outward_imports(module: str) -> set[str]:
    """The first-party imports of `module` that reach a layer above its own."""
    rank = LAYERS.index(layer(module))
    return {
        name
        for name in imports_of(module)
        if name.split(".")[0] == "swarmlog" and LAYERS.index(layer(_known(name))) < rank
    }


def _known(name: str) -> str:
    """The first-party module `name` is, or is in (an imported attribute's module)."""
    while name not in MODULES and "." in name:
        name = name.rpartition(".")[0]
    return name


def impure_imports(module: str) -> set[str]:
    """The imports of a core module that the pure core may not have."""
    return {
        name
        for name in imports_of(module)
        if name.split(".")[0] not in PURE_STDLIB | PURE_THIRD_PARTY
        and not (layer(_known(name)) == "cores" or _known(name) in {*PURE_SCHEMAS, "swarmlog.topics", *PURE_TOOLS})
    }


CORES = sorted(module for module in MODULES if layer(module) == "cores")
PURE = CORES + sorted(PURE_TOOLS) + sorted(PURE_ADAPTERS)


def test_every_layer_has_modules_and_every_module_a_layer() -> None:
    layers = {layer(module) for module in MODULES}
    assert layers == set(LAYERS)


def test_relative_and_parent_imports_are_resolved() -> None:
    source = "from . import evolve\nfrom ..schemas.events import Event\nfrom .shell import service\n"
    names = set(imported_modules("swarmlog.coordinator.decide", source))
    assert names == {"swarmlog.coordinator.evolve", "swarmlog.schemas.events", "swarmlog.coordinator.shell.service"}


def test_imports_for_annotations_only_are_not_counted() -> None:
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from swarmlog.settings import Settings\n"
    assert set(imported_modules("swarmlog.topics", source)) == {"typing"}


def test_the_contract_catches_an_outward_import() -> None:
    imports_of.cache_clear()
    original = MODULES["swarmlog.coordinator.evolve"]
    try:
        probe = ROOT / ".cache" / "layer_probe.py"
        probe.parent.mkdir(exist_ok=True)
        probe.write_text("from .shell import service\nimport asyncio\n")
        MODULES["swarmlog.coordinator.evolve"] = probe
        assert outward_imports("swarmlog.coordinator.evolve") == {"swarmlog.coordinator.shell.service"}
        assert "asyncio" in impure_imports("swarmlog.coordinator.evolve")
    finally:
        MODULES["swarmlog.coordinator.evolve"] = original
        imports_of.cache_clear()


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_module_imports_only_its_own_layer_and_those_below(module: str) -> None:
    bad = outward_imports(module)
    assert not bad, f"{module} ({layer(module)}) imports {sorted(bad)} from layers above it"


@pytest.mark.parametrize("module", PURE)
def test_a_core_module_imports_only_the_pure_core_and_harmless_stdlib(module: str) -> None:
    bad = impure_imports(module)
    assert not bad, f"{module} imports {sorted(bad)}: the pure core must not reach the shell or I/O"


@pytest.mark.parametrize("module", PURE)
def test_a_core_module_reads_no_clock_and_draws_no_random(module: str) -> None:
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_CALLS
    }
    assert not calls, f"{module} calls {sorted(calls)}: time and ids must come in the command"
