"""Data files that ship inside an installed package (a model, a binary), found without importing that package."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_dir(module: str) -> Path | None:
    """The folder of the installed package `module`, or None when it is not installed."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))
