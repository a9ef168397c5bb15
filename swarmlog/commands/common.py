"""What every CLI command shares: the consoles, documented exit codes, and one-line errors."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from swarmlog.errors import ConfigError, ServiceError, SwarmlogError

EXIT_OK = 0
EXIT_FAILED = 1  # the operation ran and its result is a failure (a mismatch, a failed mission)
EXIT_USAGE = 2  # bad flags or arguments (typer's own)
EXIT_CONFIG = 3  # a setting is wrong or missing
EXIT_SERVICE = 4  # a broker, Redis or another service could not be reached or started

out = Console()
err = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def one_line_errors(command: F) -> F:
    """Turn swarmlog errors into one red line on stderr and the documented exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except SwarmlogError as exc:
            err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
            raise typer.Exit(_exit_code(exc)) from None

    return wrapper  # type: ignore[return-value]


def _exit_code(exc: SwarmlogError) -> int:
    """The documented exit code of an error."""
    if isinstance(exc, ConfigError):
        return EXIT_CONFIG
    if isinstance(exc, ServiceError):
        return EXIT_SERVICE
    return EXIT_FAILED


def print_json(value: Any) -> None:
    """One JSON document on stdout, nothing else."""
    print(json.dumps(value, sort_keys=True, default=str))
