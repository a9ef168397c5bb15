"""Apache Kafka 4.1.2 as a local single-node KRaft process, from release jars resolved with Maven.

4.1.2 because aiokafka 0.14 is verified against Kafka 4.0 and 4.0.1+/4.1 restored JoinGroup v0/v1 (KAFKA-19494).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from swarmlog.errors import ServiceError
from swarmlog.services import process
from swarmlog.services.endpoints import Broker
from swarmlog.services.probe import kafka_answers
from swarmlog.services.process import Child

KAFKA_VERSION = "4.1.2"
POM = Path(__file__).with_name("kafka-pom.xml")
LOG_CONFIG = Path(__file__).with_name("kafka-log4j2.properties")
JVM_OPTIONS = ("-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true")

# Broker settings shared with the Docker image (swarmlog.services.docker); listeners are set per start.
BROKER_CONFIG = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "8",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "4",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "min.insync.replicas": "1",
    "group.initial.rebalance.delay.ms": "0",
    "auto.create.topics.enable": "false",
    "log.segment.bytes": str(8 * 1024 * 1024),
    "num.network.threads": "2",
    "num.io.threads": "4",
}


def resolve_jars(cache_dir: Path) -> Path:
    """The folder of Kafka's jars, resolved from Maven Central into `cache_dir` once per version of the pom."""
    home = cache_dir / f"kafka-{KAFKA_VERSION}"
    marker = home / "resolved"
    digest = hashlib.sha256(POM.read_bytes()).hexdigest()
    if marker.is_file() and marker.read_text().strip() == digest:
        return home / "libs"
    mvn = process.require_binary("mvn", apt_package="maven", needed_by="Resolving Apache Kafka's jars")
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".kafka-{KAFKA_VERSION}-", dir=cache_dir))
    try:
        process.run_once(
            [
                mvn,
                "-q",
                "-B",
                "-f",
                str(POM),
                "dependency:copy-dependencies",
                f"-DoutputDirectory={staging / 'libs'}",
                "-DincludeScope=runtime",
            ],
            what=f"Resolving Apache Kafka {KAFKA_VERSION} from Maven Central (needs network access to it once)",
            log=staging / "mvn.log",
        )
        (staging / "resolved").write_text(digest + "\n")
        # Swap the finished folder in with renames, so a reader never sees half a resolution.
        if home.exists():
            stale = Path(tempfile.mkdtemp(prefix=".stale-", dir=cache_dir))
            with contextlib.suppress(FileNotFoundError):
                home.rename(stale / home.name)
            shutil.rmtree(stale, ignore_errors=True)
        with contextlib.suppress(FileExistsError, OSError):
            staging.rename(home)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not marker.is_file():
        raise ServiceError(f"could not place Apache Kafka's jars in {home}; remove it and try again")
    return home / "libs"


def server_properties(
    data_dir: Path,
    port: int,
    controller_port: int,
    *,
    node_id: int = 1,
    voters: Mapping[int, int] | None = None,
    listeners: Mapping[str, int] | None = None,
    extra: Mapping[str, str] | None = None,
) -> str:
    """A server.properties for a node that is both broker and controller on 127.0.0.1.

    `voters` maps every node id of the cluster to its controller port (this node alone when None); with three or more
    nodes, internal topics are replicated three times and writes need two in-sync replicas. `listeners` names the
    client listeners and their ports (PLAINTEXT on `port` when None); `extra` adds or overrides properties (security,
    a listener's own settings).
    """
    voters = {node_id: controller_port} if voters is None else voters
    clients = ",".join(f"{name}://127.0.0.1:{port_}" for name, port_ in (listeners or {"PLAINTEXT": port}).items())
    config = {
        **BROKER_CONFIG,
        **replication_config(len(voters)),
        "node.id": str(node_id),
        "controller.quorum.voters": ",".join(f"{node}@127.0.0.1:{port_}" for node, port_ in sorted(voters.items())),
        "listeners": f"{clients},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": clients,
        "log.dirs": str(data_dir),
        **(extra or {}),
    }
    return "".join(f"{key}={value}\n" for key, value in config.items())


def replication_config(nodes: int) -> dict[str, str]:
    """Replication of the internal topics and the default min.insync.replicas for a cluster of `nodes` nodes."""
    factor = min(nodes, 3)
    in_sync = str(max(1, factor - 1))
    return {
        "offsets.topic.replication.factor": str(factor),
        "transaction.state.log.replication.factor": str(factor),
        "transaction.state.log.min.isr": in_sync,
        "share.coordinator.state.topic.replication.factor": str(factor),
        "share.coordinator.state.topic.min.isr": in_sync,
        "min.insync.replicas": in_sync,
        # A crashed node is fenced (its partitions led elsewhere) after 3 s, not 9: well within agents' 5 s liveness.
        **({"broker.session.timeout.ms": "3000", "broker.heartbeat.interval.ms": "500"} if nodes > 1 else {}),
    }


def java_command(cache_dir: Path) -> tuple[str, ...]:
    """The `java` command line, up to the main class, that runs Kafka's classes from its jars (resolved once)."""
    java = process.require_binary("java", apt_package="openjdk-17-jre-headless", needed_by="Apache Kafka")
    return (java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", f"{resolve_jars(cache_dir)}/*")


def cluster_id(draw: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A random cluster id as Kafka writes them (URL-safe base64 of 16 bytes) that does not start with "-".

    One in 64 ids would: kafka-storage's argument parser then takes it for an option and formatting fails (a CI
    run did). Kafka's own Uuid.randomUuid() draws again for the same reason.
    """
    while (drawn := base64.urlsafe_b64encode(draw()).decode().rstrip("=")).startswith("-"):
        pass
    return drawn


@dataclasses.dataclass
class KafkaNode:
    """One node (broker and controller) of a local cluster, on fixed ports and a fixed data dir: it can be killed
    with SIGKILL and started again on the same ports and data, as an operator restarts a crashed broker."""

    node_id: int
    port: int
    controller_port: int
    workdir: Path
    jvm: tuple[str, ...]
    name: str = f"Apache Kafka {KAFKA_VERSION}"
    probe: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    """aiokafka's security options for the readiness probe (none: the PLAINTEXT listener)."""
    child: Child | None = None
    _running: contextlib.ExitStack = dataclasses.field(default_factory=contextlib.ExitStack, repr=False)

    @property
    def bootstrap(self) -> str:
        """host:port of this node's client listener."""
        return f"127.0.0.1:{self.port}"

    @property
    def config(self) -> Path:
        """Its server.properties."""
        return self.workdir / "server.properties"

    @property
    def log(self) -> Path:
        """The file its output goes to, across restarts."""
        return self.workdir / "kafka.log"

    def format(self, cluster: str, *options: str) -> None:
        """Format the node's storage for the cluster with id `cluster`; `options` go to kafka-storage format (e.g.
        `--add-scram` users)."""
        process.run_once(
            [*self.jvm, "kafka.tools.StorageTool", "format", "--cluster-id", cluster, "--config", str(self.config),
             *options],
            what=f"Formatting Kafka node {self.node_id}'s storage",
            log=self.log,
        )  # fmt: skip

    def spawn(self) -> None:
        """Start the process, without waiting for it to answer (a cluster's first node waits for a quorum)."""
        if self.child is not None and self.child.death() is None:
            raise ServiceError(f"Kafka node {self.node_id} is already running (pid {self.child.pid})")
        self._running.close()
        self.child = self._running.enter_context(
            process.running(
                [*self.jvm, "kafka.Kafka", str(self.config)],
                name=self.name,
                log=self.log,
                ready=lambda: True,
                cwd=self.workdir,
            )
        )

    def wait_ready(self, timeout_s: float) -> None:
        """Wait until the node answers a metadata request; ServiceError with its log's tail if it dies or times out."""
        deadline = time.monotonic() + timeout_s
        while not kafka_answers(self.bootstrap, self.probe):
            assert self.child is not None, "spawn the node first"
            if (death := self.child.death(lines=40)) is not None:
                raise ServiceError(f"while starting, {death}")
            if time.monotonic() > deadline:
                raise ServiceError(
                    f"Kafka node {self.node_id} was not ready after {timeout_s:.0f}s; its log "
                    f"{self.log} ends:\n{process.log_tail(self.log)}"
                )
            time.sleep(0.1)

    def start(self, timeout_s: float = 90.0) -> None:
        """Start the node (again) on its ports and data dir and wait until it answers."""
        self.spawn()
        self.wait_ready(timeout_s)

    def kill(self) -> None:
        """SIGKILL the node's process group (no shutdown, as a crash), and wait until it is gone."""
        if self.child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.child.pid, signal.SIGKILL)
            self.child.popen.wait()
        self._running.close()

    def stop(self) -> None:
        """Stop the node gracefully (SIGTERM, then SIGKILL after a timeout); idempotent."""
        self._running.close()


@dataclasses.dataclass(frozen=True)
class KafkaCluster:
    """A local KRaft cluster of combined broker+controller nodes; `broker` is what clients connect to."""

    nodes: tuple[KafkaNode, ...]

    @property
    def bootstrap(self) -> str:
        """Every node's client listener, comma-separated."""
        return ",".join(node.bootstrap for node in self.nodes)

    @property
    def broker(self) -> Broker:
        """The cluster as a Broker; its `child` is the first node's process while the cluster has one node."""
        child = self.nodes[0].child if len(self.nodes) == 1 else None
        return Broker(kind="kafka", bootstrap=self.bootstrap, supports_transactions=True, child=child)

    def node(self, node_id: int) -> KafkaNode:
        """The node with that id."""
        return next(node for node in self.nodes if node.node_id == node_id)

    def active_controller(self) -> int | None:
        """The id of the quorum's leader (the active controller) in the newest epoch any node has recorded in its
        quorum-state file, or None while none has."""
        known: list[tuple[int, int]] = []
        for node in self.nodes:
            with contextlib.suppress(OSError, ValueError):
                state = json.loads((node.workdir / "data" / "__cluster_metadata-0" / "quorum-state").read_text())
                if state.get("leaderId", -1) >= 0:
                    known.append((state["leaderEpoch"], state["leaderId"]))
        return max(known)[1] if known else None


@contextlib.contextmanager
def run_kafka_cluster(cache_dir: Path, nodes: int = 3, timeout_s: float = 90.0) -> Iterator[KafkaCluster]:
    """A fresh KRaft cluster of `nodes` broker+controller nodes on free ports, one temporary data dir each, removed on
    exit; every node can be killed and restarted on its ports and data (see KafkaNode)."""
    jvm = java_command(cache_dir)
    with tempfile.TemporaryDirectory(prefix="swarmlog-kafka-") as tmp:
        ports = process.free_ports(2 * nodes)
        voters = {index + 1: ports[2 * index + 1] for index in range(nodes)}
        cluster = KafkaCluster(
            tuple(
                KafkaNode(
                    node_id,
                    ports[2 * index],
                    voters[node_id],
                    Path(tmp) / f"node-{node_id}",
                    jvm,
                    name=f"Apache Kafka {KAFKA_VERSION} node {node_id}",
                )
                if nodes > 1
                else KafkaNode(node_id, ports[0], voters[node_id], Path(tmp), jvm)
                for index, node_id in enumerate(voters)
            )
        )
        shared_id = cluster_id()
        for node in cluster.nodes:
            node.workdir.mkdir(exist_ok=True)
            node.config.write_text(
                server_properties(
                    node.workdir / "data", node.port, node.controller_port, node_id=node.node_id, voters=voters
                )
            )
            node.format(shared_id)
        try:
            for node in cluster.nodes:  # all at once: no node answers before a majority of the controllers runs
                node.spawn()
            for node in cluster.nodes:
                node.wait_ready(timeout_s)
            yield cluster
        finally:  # all at once too: a node stopping alone waits for a quorum the others are leaving
            process.stop_all([node.child.popen for node in cluster.nodes if node.child is not None])
            for node in cluster.nodes:
                node.stop()


@contextlib.contextmanager
def run_kafka(cache_dir: Path, timeout_s: float = 90.0) -> Iterator[Broker]:
    """A fresh Apache Kafka broker on free ports with a temporary log dir, removed on exit."""
    with run_kafka_cluster(cache_dir, nodes=1, timeout_s=timeout_s) as cluster:
        yield cluster.broker
