"""The fixture layer runs real services: Kafka is Kafka, Tansu answers, Redis is Redis, `swarmlog up` cleans up."""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import redis
from aiokafka import AIOKafkaClient, AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.protocol.admin import ApiVersionRequest
from kafka_topics import create_topic

from swarmlog.errors import ServiceError
from swarmlog.services import Broker, Redis
from swarmlog.services.kafka import cluster_id
from swarmlog.services.probe import kafka_answers
from swarmlog.services.redis import run_redis

# Kafka API keys of the transactional producer (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
# TxnOffsetCommit) and of the requests every client needs (Produce, Fetch, ListOffsets, Metadata).
TRANSACTION_APIS = {
    22: "InitProducerId",
    24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn",
    26: "EndTxn",
    28: "TxnOffsetCommit",
}
CLIENT_APIS = {0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata"}


async def _new_topic(bootstrap: str) -> str:
    """A new single-partition topic with a unique name."""
    return await create_topic(bootstrap, f"test-services-{uuid.uuid4().hex[:8]}")


async def _read_values(bootstrap: str, topic: str, until: bytes, **consumer_options: object) -> list[bytes]:
    """Values of `topic` from the beginning up to and including the first `until`."""
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", **consumer_options)
    await consumer.start()
    values: list[bytes] = []
    try:
        deadline = time.monotonic() + 30
        while until not in values and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                values.extend(record.value for record in records)
    finally:
        await consumer.stop()
    return values


@pytest.mark.kafka_only
async def test_kafka_advertises_the_transaction_apis(broker: Broker) -> None:
    """Given the Kafka broker, ApiVersions lists the transactional producer's requests."""
    client = AIOKafkaClient(bootstrap_servers=broker.bootstrap)
    await client.bootstrap()
    try:
        node_id = next(iter(client.cluster.brokers())).nodeId
        response = await client.send(node_id, ApiVersionRequest())
    finally:
        await client.close()
    supported = {api_key for api_key, _min, _max in response.api_versions}
    assert {**TRANSACTION_APIS, **CLIENT_APIS}.keys() <= supported
    assert broker.supports_transactions


@pytest.mark.kafka_only
async def test_kafka_read_committed_sees_only_committed_transactions(broker: Broker) -> None:
    """Given a committed and an aborted transaction, a read_committed consumer sees only the committed records."""
    topic = await _new_topic(broker.bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=f"tx-{topic}")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(topic, b"committed")
        await producer.begin_transaction()
        await producer.send_and_wait(topic, b"aborted")
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(topic, b"after")
    finally:
        await producer.stop()

    committed = await _read_values(broker.bootstrap, topic, until=b"after", isolation_level="read_committed")
    uncommitted = await _read_values(broker.bootstrap, topic, until=b"after", isolation_level="read_uncommitted")

    assert committed == [b"committed", b"after"]
    assert uncommitted == [b"committed", b"aborted", b"after"]


async def test_broker_produce_consume_round_trip(broker: Broker) -> None:
    """Given any broker, records produced to a new topic come back in order."""
    topic = await _new_topic(broker.bootstrap)
    producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        for value in (b"one", b"two", b"three"):
            await producer.send_and_wait(topic, value, key=b"k")
    finally:
        await producer.stop()

    assert await _read_values(broker.bootstrap, topic, until=b"three") == [b"one", b"two", b"three"]


def test_redis_is_the_spawned_redis_server(redis_server: Redis) -> None:
    """Given the session's Redis, INFO names a Redis version and, when swarmlog spawned it, that process."""
    info = redis.Redis.from_url(redis_server.url).info("server")
    assert re.fullmatch(r"\d+\.\d+\.\d+", str(info["redis_version"]))
    if redis_server.pid is not None:
        assert info["process_id"] == redis_server.pid


def test_redis_expires_keys(redis_url: str) -> None:
    """Given a key with a one second TTL, it is gone after that second."""
    client = redis.Redis.from_url(redis_url)
    key = f"test-services-{uuid.uuid4().hex}"
    client.set(key, b"x", ex=1)
    assert client.get(key) == b"x"
    deadline = time.monotonic() + 5
    while client.get(key) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert client.get(key) is None


def test_missing_redis_server_says_what_to_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Given no redis-server on PATH, starting Redis fails with the apt package to install."""
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ServiceError, match="apt-get install redis-server"), run_redis():
        pass


# `swarmlog up` as a user runs it: its own process, stopped by a signal or killed outright.

EXPORT_LINE = re.compile(
    r"export SWARMLOG_BROKER=(\S+) SWARMLOG_BOOTSTRAP=(\S+) SWARMLOG_REDIS_URL=(\S+) "
    r"SWARMLOG_REGIONS=\d+ SWARMLOG_INBOX_PARTITIONS=\d+"
)


def _start_up(broker_kind: str) -> tuple[subprocess.Popen[str], str, str]:
    """`swarmlog up --broker KIND` running, with the bootstrap and Redis URL it printed (and the kind it exports)."""
    up = subprocess.Popen(
        [sys.executable, "-m", "swarmlog", "up", "--broker", broker_kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in up.stdout or ()], daemon=True).start()
    printed = []
    deadline = time.monotonic() + 90
    with contextlib.suppress(queue.Empty):
        while up.poll() is None or not lines.empty():
            printed.append(lines.get(timeout=max(0.0, deadline - time.monotonic())))
            if match := EXPORT_LINE.search(printed[-1]):
                assert match.group(1) == broker_kind, "the export line names the broker kind processes must use"
                up.printed = printed  # type: ignore[attr-defined]
                up.lines = lines  # type: ignore[attr-defined]
                return up, match.group(2), match.group(3)
    _stop(up)
    pytest.fail("swarmlog up printed no endpoints:\n" + "".join(printed))


def _stop(up: subprocess.Popen[str]) -> None:
    """SIGTERM `swarmlog up` if it still runs, so it removes what it started; SIGKILL if it hangs."""
    up.terminate()
    try:
        up.wait(30)
    except subprocess.TimeoutExpired:
        up.kill()


def _children(pid: int) -> set[int]:
    """The pids of a process's children, over all its threads."""
    tasks = Path(f"/proc/{pid}/task").iterdir()
    return {int(child) for task in tasks for child in (task / "children").read_text().split()}


def _alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _wait_gone(pids: set[int], timeout_s: float = 15.0) -> set[int]:
    """The pids still alive after waiting up to `timeout_s` for them to go."""
    deadline = time.monotonic() + timeout_s
    while (alive := {pid for pid in pids if _alive(pid)}) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive


@pytest.mark.slow
@pytest.mark.parametrize(
    ("broker_kind", "sig"),
    [("tansu", signal.SIGINT), ("tansu", signal.SIGTERM), ("kafka", signal.SIGTERM)],
    ids=["tansu-SIGINT", "tansu-SIGTERM", "kafka-SIGTERM"],
)
def test_up_serves_until_a_signal_then_stops_everything(broker_kind: str, sig: signal.Signals) -> None:
    """Given `swarmlog up`, both printed endpoints answer; on SIGINT/SIGTERM it exits 0 and leaves no process."""
    up, bootstrap, redis_url = _start_up(broker_kind)
    try:
        services = _children(up.pid)
        assert len(services) == 2
        assert kafka_answers(bootstrap)
        assert redis.Redis.from_url(redis_url).ping()

        up.send_signal(sig)

        assert up.wait(30) == 0
        assert _wait_gone(services) == set()
    finally:
        _stop(up)


@pytest.mark.slow
def test_up_whose_broker_dies_says_so_within_5_s_stops_redis_and_exits_1() -> None:
    """Given `swarmlog up` on Tansu, when its broker is killed with SIGKILL, up names it and the signal, stops Redis
    and exits 1 within 5 s."""
    up, _bootstrap, _redis_url = _start_up("tansu")
    try:
        services = _children(up.pid)
        broker = next(pid for pid in services if "tansu" in Path(f"/proc/{pid}/cmdline").read_text())
        killed = time.monotonic()
        os.kill(broker, signal.SIGKILL)

        code = up.wait(30)
        noticed = time.monotonic() - killed
        output = "".join(up.printed)  # type: ignore[attr-defined]
        with contextlib.suppress(queue.Empty):
            while True:
                output += up.lines.get(timeout=1)  # type: ignore[attr-defined]

        assert code == 1, output
        assert "Tansu was killed by SIGKILL (signal 9)" in output
        assert noticed < 15, f"up took {noticed:.1f} s to notice and stop"  # a mechanism bound: it polls every 0.5 s
        assert _wait_gone(services) == set()
    finally:
        _stop(up)


@pytest.mark.slow
def test_up_killed_outright_leaves_no_orphans() -> None:
    """Given `swarmlog up` killed with SIGKILL, its broker and Redis die with it."""
    up, _bootstrap, _redis_url = _start_up("tansu")
    services = _children(up.pid)
    assert len(services) == 2
    workdirs = {Path(os.readlink(f"/proc/{pid}/cwd")) for pid in services}
    assert all(workdir.name.startswith("swarmlog-") for workdir in workdirs)

    os.kill(up.pid, signal.SIGKILL)
    up.wait(10)

    assert _wait_gone(services) == set()
    # Nobody is left to remove the services' temporary folders; tidy up after the test.
    for workdir in workdirs:
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_kafka_cluster_id_never_starts_with_a_dash_which_kafka_storage_would_take_for_an_option():
    draws = iter([bytes([0xF8]) + bytes(15), bytes(16)])  # 0xF8... encodes to "-A...", then "AAAA..."
    assert cluster_id(lambda: next(draws)) == "A" * 22
    assert all(not cluster_id().startswith("-") for _ in range(2000))
