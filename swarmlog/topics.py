"""Topics as code: every topic's name, key, partitions, retention and writers, and which events it carries."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # sized from the settings, it needs no more of them than their attributes
    from swarmlog.settings import Settings

# The topics' names: code names a topic by these constants, never by a string of its own.
MISSIONS = "swarm.missions"
JOURNAL = "swarm.coordinator.journal"
COORDINATORS = "swarm.coordinators"
INBOX = "swarm.agents.inbox"
SLOTS = "swarm.agents.slots"
TASK_EVENTS = "swarm.tasks.events"
HEARTBEATS = "swarm.agents.heartbeats"
REGISTRY = "swarm.agents.registry"
EXPERIENCES = "swarm.memory.experiences"
VOTES = "swarm.consensus.votes"
WAITS = "swarm.waits"
USAGE = "swarm.usage"
CONTROL = "swarm.control"
ALERTS = "swarm.alerts"
GROUND_TRUTH = "swarm.groundtruth"
DEAD_LETTERS = "swarm.deadletter"
TOP_JOURNAL = "swarm.top.journal"

DAY_MS = 86_400_000
Cleanup = Literal["delete", "compact"]


@dataclasses.dataclass(frozen=True)
class TopicSpec:
    """One topic of the catalog."""

    name: str
    key: str
    partitions: int
    cleanup: Cleanup
    retention_ms: int
    writers: tuple[str, ...]
    events: tuple[str, ...]
    doc: str

    def configs(self, settings: Settings) -> dict[str, str]:
        """The topic-level broker configuration it is created with."""
        configs = {"cleanup.policy": self.cleanup, "max.message.bytes": str(settings.max_message_bytes)}
        if self.cleanup == "delete":
            configs["retention.ms"] = str(self.retention_ms)
        if settings.replication_factor > 1:  # an acknowledged write survives the loss of any one replica
            configs["min.insync.replicas"] = str(min_insync_replicas(settings))
        return configs


def min_insync_replicas(settings: Settings) -> int:
    """The in-sync replicas a write to a swarmlog topic needs: 2 where topics are replicated, else 1."""
    return min(2, settings.replication_factor)


def catalog(settings: Settings) -> tuple[TopicSpec, ...]:
    """Every topic swarmlog uses, sized from the settings."""
    default = settings.default_partitions
    forever = -1
    return (
        TopicSpec(
            MISSIONS,
            "mission_id",
            default,
            "delete",
            30 * DAY_MS,
            ("any client",),
            ("MissionSubmitted",),
            "Missions submitted by any Kafka client.",
        ),
        TopicSpec(
            JOURNAL,
            "region",
            settings.regions,
            "delete",
            forever,
            ("coordinator",),
            (
                "MissionAccepted",
                "MissionRejected",
                "PhaseStarted",
                "TaskQueued",
                "TaskAssigned",
                "TaskReassigned",
                "TaskCancelled",
                "TaskResultRecorded",
                "AgentEnlisted",
                "AgentDelisted",
                "AgentThrottleNoted",
                "VoteRequested",
                "VoteRecorded",
                "PlanAdopted",
                "ConsensusReached",
                "ConsensusTimedOut",
                "MissionCompleted",
                "MissionFailed",
                "DeadlockBroken",
                "JournalRecordsSkipped",
                "TaskStartRecorded",
                "MissionRetired",
                "SlotAllocated",
                "SlotReleased",
                "TaskCrossChecked",
            ),
            "The coordinators' decisions, one partition per region; their state is its fold.",
        ),
        TopicSpec(
            COORDINATORS,
            "region",
            1,
            "delete",
            1 * DAY_MS,
            ("coordinator", "top"),
            ("CoordinatorAnnounced",),
            "Coordinators announcing the regions they serve (the top level: `top`), every 2 s.",
        ),
        TopicSpec(
            INBOX,
            "agent_id",
            settings.inbox_partitions,
            "delete",
            7 * DAY_MS,
            ("coordinator", "agent"),
            ("TaskAssigned", "TaskCancelled", "VoteRequested", "PeerQuestion", "PeerAnswered"),
            "Commands to agents; partition = the agent's slot.",
        ),
        TopicSpec(
            SLOTS,
            "agent_id",
            1,
            "compact",
            forever,
            ("agent", "coordinator"),
            ("SlotRequested", "SlotAllocated", "SlotReleased"),
            "Hosts asking for their agents' inbox slots, and each agent's latest allocation or release (from the journal).",
        ),
        TopicSpec(
            TASK_EVENTS,
            "mission_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("TaskStarted", "TaskStepTaken", "TaskCompleted", "TaskFailed", "TaskReleased"),
            "Task lifecycle as the agents lived it.",
        ),
        TopicSpec(
            HEARTBEATS,
            "agent_id",
            default,
            "delete",
            1 * DAY_MS,
            ("agent",),
            ("AgentHeartbeat",),
            "Liveness and status, about once a second per agent.",
        ),
        TopicSpec(
            REGISTRY,
            "agent_id",
            default,
            "compact",
            forever,
            ("agent", "streams"),
            ("AgentRegistered", "AgentDeregistered", "AgentDeclaredDead"),
            "Who is in the swarm; compacted to the latest fact per agent.",
        ),
        TopicSpec(
            EXPERIENCES,
            "agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("ExperienceRecorded",),
            "Experiences with embeddings; Redis is rebuilt from here.",
        ),
        TopicSpec(
            VOTES,
            "mission_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("VoteCast",),
            "Votes of phase 2.",
        ),
        TopicSpec(
            WAITS,
            "waiter_agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("WaitStarted", "WaitEnded"),
            "Edges of the wait-for graph.",
        ),
        TopicSpec(
            USAGE,
            "agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("TokensUsed",),
            "Token usage per generation.",
        ),
        TopicSpec(
            CONTROL,
            "agent_id or *",
            default,
            "delete",
            7 * DAY_MS,
            ("streams", "operator"),
            ("ResyncRequested", "BudgetExceeded", "BudgetRestored", "DrainRequested", "BudgetWindowSet"),
            "Control events agents obey: re-sync, throttle, drain.",
        ),
        TopicSpec(
            ALERTS,
            "cycle or agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("streams",),
            ("DeadlockDetected",),
            "Conditions the coordinator must act on.",
        ),
        TopicSpec(
            GROUND_TRUTH,
            "document_id",
            1,
            "compact",
            forever,
            ("operator", "coordinator"),
            ("GroundTruthUpdated",),
            "The shared ground-truth document agents re-sync to.",
        ),
        TopicSpec(
            DEAD_LETTERS,
            "origin topic",
            default,
            "delete",
            30 * DAY_MS,
            ("every consumer",),
            ("DeadLetterRecorded",),
            "Raw bytes of anything undecodable or invalid, with the reason.",
        ),
        TopicSpec(
            TOP_JOURNAL,
            "mission_id",
            1,
            "delete",
            forever,
            ("top",),
            (
                "MissionSplit",
                "ShareMoved",
                "ShareCompleted",
                "FinalSharePlaced",
                "MissionCompleted",
                "MissionFailed",
                "MissionRejected",
            ),
            "The top level's decisions on missions larger than a region (`swarmlog top`); its state is its fold.",
        ),
    )


def spec_for(settings: Settings, name: str) -> TopicSpec:
    """The catalog entry of a topic, or a KeyError naming the known topics."""
    for spec in catalog(settings):
        if spec.name == name:
            return spec
    raise KeyError(f"{name!r} is not a swarmlog topic; known: {', '.join(s.name for s in catalog(settings))}")
