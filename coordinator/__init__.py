"""The coordinator: pure routing and mission decisions over its journal, and the shell that runs them."""

from swarmlog.coordinator.commands import Command, Decision, Receive, Rejected, Tick
from swarmlog.coordinator.decide import decide, decide_unrouted, refuse
from swarmlog.coordinator.evolve import PROJECTION, evolve
from swarmlog.coordinator.state import INITIAL, Config, State, initial

__all__ = [
    "INITIAL",
    "PROJECTION",
    "Command",
    "Config",
    "Decision",
    "Receive",
    "Rejected",
    "State",
    "Tick",
    "decide",
    "decide_unrouted",
    "evolve",
    "initial",
    "refuse",
]
