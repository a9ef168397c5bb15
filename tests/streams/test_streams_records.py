"""Dead letters of the streams worker: one per unusable record (the shared swarmlog.kafka.records builder), always
small enough for the dead-letter topic, saying what was cut and why."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest
from streams_builders import event

from swarmlog import topics
from swarmlog.kafka.records import (
    DEAD_LETTER_MARGIN,
    KEPT_KEY_BYTES,
    KEPT_REASON_CHARS,
    NotAnInput,
    dead_letter_id,
    fitted,
    with_note,
)
from swarmlog.schemas.codec import decode, default_codec, encode
from swarmlog.schemas.records import DeadLetterRecorded
from swarmlog.streams.app.records import CONSUMER, WorkerTopics

LIMIT = 1_000_000
HEARTBEATS = "swarm.agents.heartbeats"


class Sent(WorkerTopics):
    """The worker's I/O edge with what it sends kept, not produced."""

    def __init__(self) -> None:
        super().__init__(None, default_codec(), max_message_bytes=LIMIT)
        self.sent: list[tuple] = []

    async def send(self, topic: str, key: str, event) -> None:  # type: ignore[no-untyped-def]
        self.sent.append((topic, key, event))


def record(value: bytes, key: bytes | None = b"agent-1", offset: int = 7, topic: str = HEARTBEATS) -> SimpleNamespace:
    """A consumed record, as aiokafka gives it (and Faust as a record's message): coordinates, raw key and value."""
    return SimpleNamespace(topic=topic, partition=3, offset=offset, key=key, value=value)


def taken(io: Sent, *records: SimpleNamespace) -> list:
    """What the worker makes of each record: its event, or None once dead-lettered."""
    return [asyncio.run(io.input_of(each)) for each in records]


def test_what_fits_is_kept_whole():
    assert fitted(b"x" * 100, b"k", LIMIT) == (b"x" * 100, b"k", "")


@pytest.mark.parametrize(("payload", "key"), [(2_000_000, 10), (LIMIT, 0), (10, 2 * LIMIT), (3 * LIMIT, 3 * LIMIT)])
def test_what_does_not_fit_is_cut_to_a_prefix_and_the_note_says_so(payload, key):
    kept, kept_key, note = fitted(b"p" * payload, b"k" * key, LIMIT)
    assert len(kept) + len(kept_key) <= LIMIT - DEAD_LETTER_MARGIN and len(kept_key) <= max(KEPT_KEY_BYTES, 10)
    assert f"payload cut to its first {len(kept)} of {payload} bytes" in note
    assert (f"key cut to its first {len(kept_key)} of {key} bytes" in note) == (len(kept_key) < key)


def test_a_long_reason_is_cut_and_the_note_follows_it():
    assert with_note("r" * (KEPT_REASON_CHARS + 10), "cut") == "r" * KEPT_REASON_CHARS + "... (cut)"
    assert with_note("bad magic", "") == "bad magic"


def test_the_dead_letter_of_2_mb_fits_the_dead_letter_topic_and_keeps_its_coordinates():
    io = Sent()
    assert taken(io, record(b"\x00" * 2_000_000)) == [None]
    [(topic, key, letter)] = io.sent
    assert (topic, key, letter.event_id) == (topics.DEAD_LETTERS, HEARTBEATS, dead_letter_id(HEARTBEATS, 3, 7))
    assert len(encode(letter)) <= LIMIT
    decoded = decode(encode(letter))
    assert isinstance(decoded, DeadLetterRecorded)
    assert (decoded.origin_topic, decoded.origin_partition, decoded.origin_offset) == (HEARTBEATS, 3, 7)
    assert decoded.consumer == CONSUMER and decoded.error_type == "DecodeError"
    assert decoded.reason.startswith(f"undecodable record at {HEARTBEATS}[3]@7: ")
    assert "(payload cut to its first " in decoded.reason


def test_a_record_is_dead_lettered_once_though_read_again_and_another_record_is_another():
    io = Sent()
    assert taken(io, record(b"", offset=7), record(b"", offset=7), record(b"", offset=8)) == [None] * 3
    assert [letter.event_id for _, _, letter in io.sent] == [dead_letter_id(HEARTBEATS, 3, offset) for offset in (7, 8)]


def test_an_event_of_another_kind_is_not_an_input_and_says_what_the_topic_carries():
    io = Sent()
    used = event(
        "TokensUsed",
        0,
        "e1",
        agent_id="a",
        generation_id="g",
        prompt_tokens=1,
        completion_tokens=1,
        mission_id=None,
        task_id=None,
    )
    assert taken(io, record(encode(used), topic="swarm.waits")) == [None]
    letter = io.sent[0][2]
    assert letter.error_type == NotAnInput.__name__ and "which carries WaitEnded, WaitStarted" in letter.reason
    beat = event(
        "AgentHeartbeat",
        0,
        "h1",
        agent_id="a",
        registration_id="r",
        sequence=1,
        status="IDLE",
        in_flight_task=None,
        region="r1",
        slot=0,
    )
    assert taken(io, record(encode(beat), offset=9)) == [beat] and len(io.sent) == 1
