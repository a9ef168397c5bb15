"""Imports point inward: the pure core (folds and decisions) touches no I/O, no clock, no randomness."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "schemas": "swarmlog.schemas",
    "coordinator": "swarmlog.coordinator",
    "streams": "swarmlog.streams",
    "actors": "swarmlog.actors",
}
PURE_FILES = [
    "schemas/events.py",
    "schemas/invariants.py",
    *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "coordinator").glob("*.py")),
    *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "streams").glob("*.py")),
    "actors/actions.py",
    "actors/domain.py",
    "actors/groundtruth.py",
    "actors/peers.py",
    "actors/prompts.py",
    "actors/steps.py",
]
STDLIB_ALLOWED = {
    "__future__",
    "abc",
    "bisect",
    "collections",
    "copy",
    "dataclasses",
    "datetime",
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
CLOCK_CALLS = {"now", "utcnow", "today", "time", "monotonic", "perf_counter", "time_ns", "random", "uuid4"}


def _module_name(relative: str) -> str:
    """The installed name of a file under the repository root."""
    folder, _, rest = relative.partition("/")
    return f"{PACKAGES[folder]}.{rest.removesuffix('.py').replace('/', '.')}".removesuffix(".__init__")


PURE_MODULES = {_module_name(relative) for relative in PURE_FILES}


def imported_names(tree: ast.AST) -> Iterator[str]:
    """Every module an AST imports, naming `from pkg import module` imports by the module."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                yield full if full in PURE_MODULES else node.module


def impure_imports(source: str) -> set[str]:
    """The imports of `source` that the pure core may not have."""
    return {
        name
        for name in imported_names(ast.parse(source))
        if name.split(".")[0] not in STDLIB_ALLOWED and name not in PURE_MODULES
    }


def test_the_check_catches_io_and_the_shell() -> None:
    assert impure_imports("import asyncio\nfrom swarmlog.coordinator.shell import service\nimport json") == {
        "asyncio",
        "swarmlog.coordinator.shell",
    }


@pytest.mark.parametrize("relative", PURE_FILES)
def test_a_pure_module_imports_only_the_pure_core_and_harmless_stdlib(relative: str) -> None:
    bad = impure_imports((ROOT / relative).read_text())
    assert not bad, f"{relative} imports {sorted(bad)}: the pure core must not reach the shell or I/O"


@pytest.mark.parametrize("relative", PURE_FILES)
def test_a_pure_module_reads_no_clock_and_draws_no_random(relative: str) -> None:
    tree = ast.parse((ROOT / relative).read_text())
    calls = {
        node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLOCK_CALLS
    }
    assert not calls, f"{relative} calls {sorted(calls)}: time and ids must come in the command"
