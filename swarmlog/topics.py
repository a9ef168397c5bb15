"""Topics as code: every topic's name, key, partitions, retention and writers, and which events it carries."""

from __future__ import annotations

import dataclasses
from typing import Literal

from swarmlog.settings import Settings

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
            "swarm.missions",
            "mission_id",
            default,
            "delete",
            30 * DAY_MS,
            ("any client",),
            ("MissionSubmitted",),
            "Missions submitted by any Kafka client.",
        ),
        TopicSpec(
            "swarm.coordinator.journal",
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
            ),
            "The coordinators' decisions, one partition per region; their state is its fold.",
        ),
        TopicSpec(
            "swarm.coordinators",
            "region",
            1,
            "delete",
            1 * DAY_MS,
            ("coordinator",),
            ("CoordinatorAnnounced",),
            "Coordinators announcing the regions they serve, every 2 s.",
        ),
        TopicSpec(
            "swarm.agents.inbox",
            "agent_id",
            settings.inbox_partitions,
            "delete",
            7 * DAY_MS,
            ("coordinator", "agent"),
            ("TaskAssigned", "TaskCancelled", "VoteRequested", "PeerQuestion", "PeerAnswered"),
            "Commands to agents; partition = the agent's slot.",
        ),
        TopicSpec(
            "swarm.tasks.events",
            "mission_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("TaskStarted", "TaskStepTaken", "TaskCompleted", "TaskFailed", "TaskReleased"),
            "Task lifecycle as the agents lived it.",
        ),
        TopicSpec(
            "swarm.agents.heartbeats",
            "agent_id",
            default,
            "delete",
            1 * DAY_MS,
            ("agent",),
            ("AgentHeartbeat",),
            "Liveness and status, about once a second per agent.",
        ),
        TopicSpec(
            "swarm.agents.registry",
            "agent_id",
            default,
            "compact",
            forever,
            ("agent", "streams"),
            ("AgentRegistered", "AgentDeregistered", "AgentDeclaredDead"),
            "Who is in the swarm; compacted to the latest fact per agent.",
        ),
        TopicSpec(
            "swarm.memory.experiences",
            "agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("ExperienceRecorded",),
            "Experiences with embeddings; Redis is rebuilt from here.",
        ),
        TopicSpec(
            "swarm.consensus.votes",
            "mission_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("VoteCast",),
            "Votes of phase 2.",
        ),
        TopicSpec(
            "swarm.waits",
            "waiter_agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("WaitStarted", "WaitEnded"),
            "Edges of the wait-for graph.",
        ),
        TopicSpec(
            "swarm.usage",
            "agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("agent",),
            ("TokensUsed",),
            "Token usage per generation.",
        ),
        TopicSpec(
            "swarm.control",
            "agent_id or *",
            default,
            "delete",
            7 * DAY_MS,
            ("streams", "operator"),
            ("ResyncRequested", "BudgetExceeded", "BudgetRestored", "DrainRequested"),
            "Control events agents obey: re-sync, throttle, drain.",
        ),
        TopicSpec(
            "swarm.alerts",
            "cycle or agent_id",
            default,
            "delete",
            30 * DAY_MS,
            ("streams",),
            ("DeadlockDetected",),
            "Conditions the coordinator must act on.",
        ),
        TopicSpec(
            "swarm.groundtruth",
            "document_id",
            1,
            "compact",
            forever,
            ("operator", "coordinator"),
            ("GroundTruthUpdated",),
            "The shared ground-truth document agents re-sync to.",
        ),
        TopicSpec(
            "swarm.deadletter",
            "origin topic",
            default,
            "delete",
            30 * DAY_MS,
            ("every consumer",),
            ("DeadLetterRecorded",),
            "Raw bytes of anything undecodable or invalid, with the reason.",
        ),
    )


def spec_for(settings: Settings, name: str) -> TopicSpec:
    """The catalog entry of a topic, or a KeyError naming the known topics."""
    for spec in catalog(settings):
        if spec.name == name:
            return spec
    raise KeyError(f"{name!r} is not a swarmlog topic; known: {', '.join(s.name for s in catalog(settings))}")
