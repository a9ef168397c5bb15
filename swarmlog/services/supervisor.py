"""Supervision: the first child that exits while it should run stops the whole group, named with how it died."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import TypeVar

from swarmlog.errors import SwarmlogError
from swarmlog.services.process import Child

POLL_S = 0.5
T = TypeVar("T")


class ChildDied(SwarmlogError):
    """A process swarmlog supervises exited while it should have been running; the message says how, with its log."""


def first_death(children: Sequence[Child]) -> ChildDied | None:
    """A ChildDied for the first child that has exited, or None while all run."""
    for child in children:
        death = child.death()
        if death is not None:
            return ChildDied(death)
    return None


async def unless_a_child_dies(work: Awaitable[T], children: Sequence[Child], poll_s: float = POLL_S) -> T:
    """The result of `work`, unless a child exits first: then `work` is cancelled and ChildDied raised."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait([task], timeout=poll_s)
            if done:
                return task.result()
            death = first_death(children)
            if death is not None:
                raise death
    finally:
        if not task.done():
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
