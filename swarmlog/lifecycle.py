"""Starting and stopping long-running processes: clients stopped with their service; SIGTERM and SIGINT start a clean
stop that has a deadline."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Callable
from typing import Protocol, Self, TypeVar

EXIT_STUCK = 4  # the documented "a service could not be reached" code: a stop only sticks on an unreachable broker
log = logging.getLogger("swarmlog.lifecycle")


class Client(Protocol):
    """An aiokafka client or EventProducer: started, then stopped."""

    async def start(self) -> None: ...
    async def stop(self) -> None: ...


C = TypeVar("C", bound=Client)


class Running:
    """What runs between its `start()` and `stop()`: `async with` it runs it for the block."""

    async def start(self) -> None:
        """Start; subclasses say what."""
        raise NotImplementedError

    async def stop(self) -> None:
        """Stop; subclasses say what."""
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def start_in(stack: contextlib.AsyncExitStack, client: C) -> C:
    """A started client, stopped when `stack` closes."""
    await client.start()
    stack.push_async_callback(client.stop)
    return client


def stop_on_signals(begin_stop: Callable[[], None], *, what: str, deadline_s: float) -> None:
    """On SIGTERM/SIGINT call `begin_stop`; if the process still runs `deadline_s` later, exit with EXIT_STUCK.

    Everything swarmlog acknowledges is written first, so leaving without the rest of a clean stop (a
    deregistration, a final flush to a broker that stopped answering) loses nothing that a kill -9 would not.
    """
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        begin_stop()
        loop.call_later(deadline_s, _give_up, what, deadline_s)

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)


def _give_up(what: str, deadline_s: float) -> None:
    """Leave now: the clean stop did not finish in time."""
    log.error(
        "%s did not stop within %.0f s (is the broker reachable?); exiting without the rest of the stop",
        what,
        deadline_s,
    )
    os._exit(EXIT_STUCK)
