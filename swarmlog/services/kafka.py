"""Apache Kafka 4.1.2 as a local single-node KRaft process, from release jars resolved with Maven.

4.1.2 because aiokafka 0.14 is verified against Kafka 4.0 and 4.0.1+/4.1 restored JoinGroup v0/v1 (KAFKA-19494).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from swarmlog.errors import ServiceError
from swarmlog.services import process
from swarmlog.services.endpoints import Broker
from swarmlog.services.probe import kafka_answers

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
            [mvn, "-q", "-B", "-f", str(POM), "dependency:copy-dependencies",
             f"-DoutputDirectory={staging / 'libs'}", "-DincludeScope=runtime"],
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


def server_properties(data_dir: Path, port: int, controller_port: int) -> str:
    """A server.properties for a single node that is both broker and controller on 127.0.0.1."""
    config = {
        **BROKER_CONFIG,
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "log.dirs": str(data_dir),
    }
    return "".join(f"{key}={value}\n" for key, value in config.items())


def cluster_id(draw: Callable[[], bytes] = lambda: uuid.uuid4().bytes) -> str:
    """A random cluster id as Kafka writes them (URL-safe base64 of 16 bytes) that does not start with "-".

    One in 64 ids would: kafka-storage's argument parser then takes it for an option and formatting fails (a CI
    run did). Kafka's own Uuid.randomUuid() draws again for the same reason.
    """
    while (drawn := base64.urlsafe_b64encode(draw()).decode().rstrip("=")).startswith("-"):
        pass
    return drawn


@contextlib.contextmanager
def run_kafka(cache_dir: Path, timeout_s: float = 90.0) -> Iterator[Broker]:
    """A fresh Apache Kafka broker on free ports with a temporary log dir, removed on exit."""
    java = process.require_binary("java", apt_package="openjdk-17-jre-headless", needed_by="Apache Kafka")
    classpath = f"{resolve_jars(cache_dir)}/*"
    with tempfile.TemporaryDirectory(prefix="swarmlog-kafka-") as tmp:
        workdir = Path(tmp)
        log = workdir / "kafka.log"
        port, controller_port = process.free_ports(2)
        config = workdir / "server.properties"
        config.write_text(server_properties(workdir / "data", port, controller_port))
        jvm = [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={LOG_CONFIG}", "-cp", classpath]
        process.run_once(
            [*jvm, "kafka.tools.StorageTool", "format", "--cluster-id", cluster_id(), "--config", str(config)],
            what="Formatting Kafka's storage",
            log=log,
        )
        bootstrap = f"127.0.0.1:{port}"
        with process.running(
            [*jvm, "kafka.Kafka", str(config)],
            name=f"Apache Kafka {KAFKA_VERSION}",
            log=log,
            ready=lambda: kafka_answers(bootstrap),
            timeout_s=timeout_s,
            cwd=workdir,
        ) as broker:
            yield Broker(kind="kafka", bootstrap=bootstrap, supports_transactions=True, child=broker)
