"""MissionClient: submit missions and follow them through the coordinator journal, from Python.

Also a typed mission builder (`Mission`, `Task`, `Consensus`, `FinalAction`, `Planning`) whose `to_dict()` is what
`submit` takes, `load_mission` for YAML/JSON files, `MissionClient.progress` (a mission's events, each with its
`MissionProgress`: the fold `swarmlog.coordinator.progress.PROGRESS`) and `SyncMissionClient` for code without an
event loop.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import uuid
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec
from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from swarmlog.coordinator import plan
from swarmlog.coordinator.announcements import served
from swarmlog.coordinator.journal import Unreadable
from swarmlog.coordinator.placement import TOP, owner
from swarmlog.coordinator.progress import PROGRESS, MissionProgress, Terminal
from swarmlog.coordinator.shell.announce import read_announcements
from swarmlog.coordinator.shell.recovery import repair_command
from swarmlog.envelope import now_ms
from swarmlog.errors import DecodeError, EncodeError, SwarmlogError
from swarmlog.kafka.connection import start
from swarmlog.kafka.producer import EventProducer, idempotence_supported
from swarmlog.kafka.reading import reader, records_to_end
from swarmlog.schemas.codec import codec_for
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import MissionCompleted, MissionRejected, MissionSubmitted
from swarmlog.settings import Settings
from swarmlog.topics import JOURNAL, MISSIONS, TOP_JOURNAL, spec_for

log = logging.getLogger("swarmlog.client")


class MissionTimeout(SwarmlogError):
    """A mission did not end within the time the caller gave it."""

    retriable = True


class MissionInvalid(SwarmlogError):
    """A mission that does not match the MissionSubmitted schema or is not a runnable plan; nothing was produced."""


MISSION_FIELDS = (
    "mission_id",
    "title",
    "region",
    "tasks",
    "planning",
    "consensus",
    "final_action",
    "deadline_ms",
    "token_budget",
    "submitted_by",
    "pass_replicas",
)
TASK_FIELDS = (
    "task_id",
    "prompt",
    "required_capabilities",
    "depends_on",
    "replicas",
    "max_steps",
    "max_tokens",
    "check",
    "judge",
)


def validate_mission(mission: Mapping[str, Any], *, producer: str = "client:python") -> MissionSubmitted:
    """The MissionSubmitted event of a mission dict, checked by the codec and the plan rules; MissionInvalid if not."""
    if not isinstance(mission, Mapping):
        raise MissionInvalid(
            f"a mission is a mapping of fields ({', '.join(MISSION_FIELDS)}), not {type(mission).__name__}"
        )
    unknown = sorted(set(mission) - set(MISSION_FIELDS))
    if unknown:
        raise MissionInvalid(
            f"unknown mission field(s) {', '.join(unknown)}; the fields are {', '.join(MISSION_FIELDS)}"
        )
    for index, task in enumerate(mission.get("tasks") or ()):
        extra = sorted(set(task) - set(TASK_FIELDS)) if isinstance(task, Mapping) else []
        if extra:
            raise MissionInvalid(
                f"tasks[{index}] has unknown field(s) {', '.join(extra)}; a task has {', '.join(TASK_FIELDS)}"
            )
    fields = {"mission_id": uuid.uuid4().hex[:12], "region": None, "submitted_by": producer} | dict(mission)
    envelope = {"event_id": uuid.uuid4().hex, "occurred_at": now_ms(), "producer": producer}
    try:
        event = msgspec.convert(fields | envelope | {"correlation_id": fields["mission_id"]}, MissionSubmitted)
    except msgspec.ValidationError as exc:
        raise MissionInvalid(f"MissionSubmitted does not match its schema: {exc}; nothing was produced") from None
    try:
        codec_for(None).encode(event)
    except EncodeError as exc:
        raise MissionInvalid(f"{exc}; nothing was produced") from None
    if bool(event.tasks) == bool(event.planning):
        raise MissionInvalid("a mission needs either `tasks` or a `planning` step (not both, not neither)")
    problem = plan.problem([plan.from_record(task) for task in event.tasks]) if event.tasks else None
    if problem:
        raise MissionInvalid(f"tasks: {problem}")
    return event


def load_mission(path: Path | str) -> dict[str, Any]:
    """A mission dict from a .yaml/.yml or .json file; MissionInvalid saying what is wrong with the file."""
    import yaml  # the CLI's dependency; imported here so the client stays light

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise MissionInvalid(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise MissionInvalid(
            f"{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {' '.join(str(exc).split())}"
        ) from None
    if not isinstance(data, dict):
        raise MissionInvalid(f"{path} must hold one mapping (title, tasks, ...), not {type(data).__name__}")
    return data


@dataclasses.dataclass(frozen=True)
class Task:
    """One task of a mission's DAG: run `replicas` times on agents having `capabilities`, after `depends_on`."""

    task_id: str
    prompt: str
    capabilities: tuple[str, ...] = ()
    depends_on: tuple[str, ...] = ()
    replicas: int = 1
    max_steps: int = 4
    max_tokens: int | None = None
    """Tokens each generation of the task may take; None: the agent's own (--max-tokens, else its brain's default)."""
    check: Literal["EQUAL", "VOTE", "JUDGE"] = "EQUAL"
    """How its replicas' outputs are cross-checked (replicas > 1): normalised equality and a tie-breaker, a ballot among
    the agents that gave them, or one judge agent's verdict."""
    judge: str | None = None
    """With check JUDGE: the capability the judge agent has."""

    def to_dict(self) -> dict[str, Any]:
        """The Avro TaskSpec record."""
        return {
            "task_id": self.task_id,
            "prompt": self.prompt,
            "required_capabilities": list(self.capabilities),
            "depends_on": list(self.depends_on),
            "replicas": self.replicas,
            "max_steps": self.max_steps,
            "max_tokens": self.max_tokens,
            "check": self.check,
            "judge": self.judge,
        }


@dataclasses.dataclass(frozen=True)
class Consensus:
    """Phase 2: how the outputs are voted on, for how long, and what fraction of voters must vote."""

    strategy: Literal["MAJORITY", "CONFIDENCE_WEIGHTED"] = "MAJORITY"
    window_s: float = 30.0
    quorum: float = 0.5

    def to_dict(self) -> dict[str, Any]:
        """The Avro ConsensusSpec record."""
        return {"strategy": self.strategy, "window_ms": round(self.window_s * 1000), "quorum": self.quorum}


@dataclasses.dataclass(frozen=True)
class FinalAction:
    """Phase 3: the action taken on the consensus, by an agent with `decision_making` (and `capabilities`)."""

    prompt: str
    capabilities: tuple[str, ...] = ("decision_making",)

    def to_dict(self) -> dict[str, Any]:
        """The Avro FinalActionSpec record."""
        return {"prompt": self.prompt, "required_capabilities": list(self.capabilities)}


@dataclasses.dataclass(frozen=True)
class Planning:
    """A planning task whose answer becomes the mission's task list (instead of explicit tasks)."""

    prompt: str
    capabilities: tuple[str, ...] = ("planning",)

    def to_dict(self) -> dict[str, Any]:
        """The Avro PlanningSpec record."""
        return {"prompt": self.prompt, "required_capabilities": list(self.capabilities)}


@dataclasses.dataclass(frozen=True)
class Mission:
    """A typed mission; `to_dict()` gives what `MissionClient.submit` takes (and what a YAML mission file holds)."""

    title: str
    tasks: tuple[Task, ...] = ()
    consensus: Consensus = Consensus()
    final_action: FinalAction | None = None
    planning: Planning | None = None
    token_budget: int | None = None
    deadline_s: float | None = None
    region: str | None = None
    mission_id: str | None = None
    pass_replicas: bool = False
    """Tasks after a replicated task get each of its replicas' outputs too (`<task>/<replica>`), not only the one
    its cross-check chose."""

    def with_task(self, task: Task) -> Mission:
        """A copy with one more task."""
        return dataclasses.replace(self, tasks=(*self.tasks, task))

    def to_dict(self) -> dict[str, Any]:
        """The MissionSubmitted fields (without the envelope), omitting what is unset."""
        mission: dict[str, Any] = {
            "title": self.title,
            "tasks": [task.to_dict() for task in self.tasks],
            "consensus": self.consensus.to_dict(),
        }
        optional = {
            "final_action": self.final_action and self.final_action.to_dict(),
            "planning": self.planning and self.planning.to_dict(),
            "token_budget": self.token_budget,
            "deadline_ms": None if self.deadline_s is None else round(self.deadline_s * 1000),
            "region": self.region,
            "mission_id": self.mission_id,
            "pass_replicas": self.pass_replicas or None,
        }
        return mission | {name: value for name, value in optional.items() if value is not None}


class MissionClient:
    """Submits MissionSubmitted events and reads a mission's decisions from its region's journal partition."""

    def __init__(self, settings: Settings, *, client_name: str = "python") -> None:
        self._settings = settings
        self._producer_name = f"client:{client_name}"
        self._codec = codec_for(settings.schema_registry_url)

    def region_of(self, mission_id: str, region: str | None = None) -> str:
        """The region that runs the mission: the one it names, else the coordinators' placement."""
        return region or owner(mission_id, self._settings.region_names)

    def validate(self, mission: Mapping[str, Any] | Mission) -> MissionSubmitted:
        """The MissionSubmitted event this client would produce, or MissionInvalid naming the field; no I/O."""
        return validate_mission(
            mission.to_dict() if isinstance(mission, Mission) else mission, producer=self._producer_name
        )

    @staticmethod
    def validate_offline(mission: Mapping[str, Any] | Mission) -> MissionSubmitted:
        """`validate` without a client (no settings needed): for checking files before connecting."""
        return validate_mission(mission.to_dict() if isinstance(mission, Mission) else mission)

    async def served_regions(self) -> tuple[str, ...]:
        """The regions a live coordinator serves now, and `top` while a top level runs, from their announcements on
        swarm.coordinators."""
        return served(await read_announcements(self._settings), (*self._settings.region_names, TOP), now_ms())

    async def submit(self, mission: Mapping[str, Any] | Mission) -> str:
        """Produce a MissionSubmitted (validated against its schema first, placed) and return the mission id."""
        event = await self.placed(mission)
        await self.produce(event)
        return event.mission_id

    async def placed(
        self, mission: Mapping[str, Any] | Mission, served_regions: tuple[str, ...] | None = None
    ) -> MissionSubmitted:
        """The validated MissionSubmitted, with a region: the one it names, else one a live coordinator serves.

        The region is a stable hash of the mission id over the served regions; when none is served, over every
        region, where the mission waits for a coordinator.
        """
        event = self.validate(mission)
        if event.region is not None:
            return event
        regions = await self.served_regions() if served_regions is None else served_regions
        regions = tuple(region for region in regions if region != TOP)  # the top level takes only what names it
        return msgspec.structs.replace(event, region=owner(event.mission_id, regions or self._settings.region_names))

    async def produce(self, event: MissionSubmitted) -> None:
        """Write a MissionSubmitted to swarm.missions and wait until the broker has it."""
        async with EventProducer(self._settings, client_id="swarmlog-client") as producer:
            await producer.send(MISSIONS, event, key=event.mission_id)

    async def locate(self, mission_id: str) -> str:
        """The region whose journal holds the mission; else the region its MissionSubmitted names (it waits for a
        coordinator there); else its placement over every region."""
        missions = [TopicPartition(MISSIONS, index) for index in range(spec_for(self._settings, MISSIONS).partitions)]
        consumer = reader(self._settings, "swarmlog-client", idempotence_supported(self._settings))
        await start(consumer, self._settings)
        try:
            for index, region in enumerate(self._settings.region_names):
                if await self._find(consumer, TopicPartition(JOURNAL, index), mission_id) is not None:
                    return region
            for tp in missions:
                submitted = await self._find(consumer, tp, mission_id)
                if isinstance(submitted, MissionSubmitted):
                    return self.region_of(mission_id, submitted.region)
        finally:
            await consumer.stop()
        return self.region_of(mission_id)

    async def _find(self, consumer: AIOKafkaConsumer, tp: TopicPartition, mission_id: str) -> Event | None:
        """The first event of the mission in a partition, read from its start to its end; None if there is none."""
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        async for record in records_to_end(consumer, tp):
            if mission_id.encode() in (record.value or b""):  # cheap pre-check before decoding
                event = self._decoded(record)
                if event is not None and of_mission(event, mission_id):
                    return event
        return None

    async def follow(self, mission_id: str, region: str | None = None) -> AsyncIterator[Event]:
        """The mission's journal events from the start, live, ending with its terminal event (in the region given,
        else the one whose journal holds it, else its placement)."""
        region = region or (await self.locate(mission_id) if len(self._settings.region_names) > 1 else None)
        region = self.region_of(mission_id, region)
        tp = (
            TopicPartition(TOP_JOURNAL, 0)  # a mission for the top level: its split, its shares, its end
            if region == TOP
            else TopicPartition(JOURNAL, self._settings.region_names.index(region))
        )
        consumer = reader(self._settings, "swarmlog-client", idempotence_supported(self._settings))
        await start(consumer, self._settings)
        try:
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while True:
                for record in (await consumer.getmany(tp, timeout_ms=200)).get(tp, []):
                    event = self._decoded(record)
                    if event is not None and of_mission(event, mission_id):
                        yield event
                        if isinstance(event, Terminal):
                            return
        finally:
            await consumer.stop()

    async def progress(
        self, mission_id: str, region: str | None = None
    ) -> AsyncIterator[tuple[Event, MissionProgress]]:
        """The mission's journal events as `follow` gives them, each with the mission's progress after it."""
        progress = PROGRESS.initial(mission_id)
        async for event in self.follow(mission_id, region):
            progress = PROGRESS.evolve(progress, event)
            yield event, progress

    def _decoded(self, record: ConsumerRecord) -> Event | None:
        """A record's event; None when it cannot be decoded (a journal record is reported, with its repair)."""
        try:
            return self._codec.decode_record(record.value or b"", record.topic, record.partition, record.offset)
        except DecodeError as exc:
            if record.topic == JOURNAL:
                region = self._settings.region_names[record.partition]
                log.warning(
                    "passing over %s; unless it was repaired, %s's coordinator will not start until it is: %s",
                    exc,
                    region,
                    repair_command(region, [Unreadable(record.offset, exc.reason)]),
                )
            return None

    async def wait(self, mission_id: str, region: str | None = None, timeout_s: float = 300.0) -> Terminal:
        """The mission's terminal event, or MissionTimeout after `timeout_s`."""
        try:
            async with asyncio.timeout(timeout_s):
                async for event in self.follow(mission_id, region):
                    if isinstance(event, Terminal):
                        return event
        except TimeoutError:
            pass
        raise MissionTimeout(f"mission {mission_id} did not end within {timeout_s:.0f} s; `swarmlog watch` follows it")


class SyncMissionClient:
    """MissionClient for code without an event loop: each call runs to completion on a private loop."""

    def __init__(self, settings: Settings, *, client_name: str = "python") -> None:
        self._client = MissionClient(settings, client_name=client_name)

    def submit(self, mission: Mapping[str, Any] | Mission) -> str:
        """Produce the mission and return its id."""
        return asyncio.run(self._client.submit(mission))

    def wait(self, mission_id: str, region: str | None = None, timeout_s: float = 300.0) -> Terminal:
        """The mission's terminal event, or MissionTimeout."""
        return asyncio.run(self._client.wait(mission_id, region, timeout_s))

    def events(self, mission_id: str, region: str | None = None, timeout_s: float = 300.0) -> list[Event]:
        """Every journal event of the mission up to its end, or MissionTimeout."""

        async def collect() -> list[Event]:
            try:
                async with asyncio.timeout(timeout_s):
                    return [event async for event in self._client.follow(mission_id, region)]
            except TimeoutError:
                raise MissionTimeout(f"mission {mission_id} did not end within {timeout_s:.0f} s") from None

        return asyncio.run(collect())

    def run(self, mission: Mapping[str, Any] | Mission, timeout_s: float = 300.0) -> Terminal:
        """Submit and wait: the terminal event."""
        return self.wait(self.submit(mission), timeout_s=timeout_s)


def outcome(result: Terminal) -> dict[str, Any]:
    """A mission's end: its success or reason, then (unless it was rejected) its counts, time, tokens and outputs."""
    if isinstance(result, MissionRejected):
        return {"reason": result.reason}
    said: dict[str, Any] = (
        {"success": result.success} if isinstance(result, MissionCompleted) else {"reason": result.reason}
    )
    return said | {
        "latency_ms": result.latency_ms,
        "agent_count": result.agent_count,
        "tasks_completed": result.tasks_completed,
        "tasks_failed": result.tasks_failed,
        "malformed_count": result.malformed_count,
        "consensus_ms": result.consensus_ms,
        "tokens_used": result.tokens_used,
        "outputs": result.outputs,
    }


def of_mission(event: Event, mission_id: str) -> bool:
    """Whether the event is one of the mission's: its mission_id field (where its record has one) names it."""
    return event.mission_id == mission_id
