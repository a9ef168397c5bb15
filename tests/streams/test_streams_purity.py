"""The folds and decisions of the stream processors import only the standard library and the event contract."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import swarmlog.streams

PURE = ["alerts", "registry", "waitgraph", "budgets", "memory"]
ALLOWED = {"__future__", "collections", "dataclasses", "datetime", "functools", "hashlib", "json", "typing",
           "swarmlog.schemas.events"}


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_imports_only_allowed_modules(module):
    source = Path(swarmlog.streams.__file__).with_name(f"{module}.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            imported.add(node.module if node.module.startswith("swarmlog.") else node.module.split(".")[0])
    assert imported <= ALLOWED, f"streams/{module}.py imports {sorted(imported - ALLOWED)}"
