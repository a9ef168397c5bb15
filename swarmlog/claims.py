"""Who may say what: a signed event's verdict from its signer's trust entry and the identities the event names.

Pure: the adapter (swarmlog.kafka.signing) checks the Ed25519 signature and passes the outcome in; this decides.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Literal

from swarmlog.schemas.events import Event

Role = Literal["agent", "coordinator", "streams", "top", "operator"]
BOUND_ROLES: tuple[Role, ...] = ("agent", "coordinator")
"""Roles whose names a `producer` of the form `<role>:<name>` binds: only such a principal may write it, for a name
within its claims. The other roles' producers name no agent or region."""
Refusal = Literal["unsigned", "unknown-signer", "bad-signature", "over-claim"]


@dataclasses.dataclass(frozen=True)
class Principal:
    """A signer of the trust file: its role and the names it may claim (agent ids or regions; `*` matches any run of
    characters)."""

    name: str
    role: Role
    claims: tuple[str, ...] = ()

    def may_claim(self, name: str) -> bool:
        """Whether `name` (an agent id for an agent, a region for a coordinator) is one of this principal's."""
        return any(re.fullmatch(re.escape(pattern).replace(r"\*", ".*"), name) for pattern in self.claims)


@dataclasses.dataclass(frozen=True)
class Refused:
    """Why a record is not taken as its signer's: the kind (a dead letter's reason starts with it) and the detail."""

    kind: Refusal
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


def named(event: Event) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The agent ids and the regions an event names as its writer's own: its `agent_id`, `from_agent_id` and
    `region` fields, and the name in a `producer` of the form `agent:<id>` or `coordinator:<region>`."""
    role, _, name = event.producer.partition(":")
    fields = {field: getattr(event, field, None) for field in ("agent_id", "from_agent_id", "region")}
    agents = [value for field, value in fields.items() if field != "region" and isinstance(value, str)]
    regions = [fields["region"]] if isinstance(fields["region"], str) else []
    return (
        (*agents, *([name] if role == "agent" else [])),
        (*regions, *([name] if role == "coordinator" else [])),
    )


def verdict(
    event: Event, signer: str | None, signature_valid: bool, principals: Mapping[str, Principal]
) -> Refused | None:
    """None when `event` is signed by a known principal whose claims cover every identity it names; else why not.
    `signer` is the record's signer header (None: unsigned), `signature_valid` whether its signature checks."""
    if signer is None:
        return Refused("unsigned", f"{event.name} {event.event_id} carries no signature")
    principal = principals.get(signer)
    if principal is None:
        return Refused(
            "unknown-signer", f"{event.name} {event.event_id} is signed by {signer!r}, not in the trust file"
        )
    if not signature_valid:
        return Refused("bad-signature", f"{event.name} {event.event_id}: the signature of {signer!r} does not match")
    role = event.producer.partition(":")[0]
    if role in BOUND_ROLES and role != principal.role:
        return Refused("over-claim", f"{signer!r} ({principal.role}) wrote {event.name} as {event.producer!r}")
    agents, regions = named(event)
    claimed = agents if principal.role == "agent" else regions if principal.role == "coordinator" else ()
    beyond = [name for name in dict.fromkeys(claimed) if not principal.may_claim(name)]
    if beyond:
        return Refused(
            "over-claim",
            f"{signer!r} may claim {', '.join(principal.claims) or 'nothing'}, but {event.name} {event.event_id} names "
            f"{', '.join(beyond)}",
        )
    return None
