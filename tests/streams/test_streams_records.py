"""Dead letters of the streams worker: always small enough for the dead-letter topic, saying what was cut and why."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from swarmlog.errors import DecodeError
from swarmlog.kafka.records import DEAD_LETTER_MARGIN, KEPT_KEY_BYTES, KEPT_REASON_CHARS, fitted, with_note
from swarmlog.schemas.codec import decode, encode
from swarmlog.streams.app.records import NotAnInput, carried, dead_letter
from swarmlog.settings import Settings

LIMIT = 1_000_000


def record(value: bytes, key: bytes | None = b"agent-1", offset: int = 7) -> SimpleNamespace:
    message = SimpleNamespace(topic="swarm.agents.heartbeats", partition=3, offset=offset)
    return SimpleNamespace(message=message, key=key, value=value)


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
    letter = dead_letter(record(b"\x00" * 2_000_000), DecodeError("wrong magic 00 00"), LIMIT)
    assert len(encode(letter)) <= LIMIT
    data = decode(encode(letter)).data
    assert (data["origin_topic"], data["origin_partition"], data["origin_offset"]) == ("swarm.agents.heartbeats", 3, 7)
    assert data["reason"].startswith("wrong magic 00 00 (payload cut to its first ")


def test_a_repeat_is_the_same_dead_letter_and_another_record_another():
    first, again = (dead_letter(record(b"", offset=7), DecodeError("empty"), LIMIT) for _ in range(2))
    other = dead_letter(record(b"", offset=8), DecodeError("empty"), LIMIT)
    assert first.event_id == again.event_id != other.event_id


def test_an_event_of_another_kind_is_not_an_input_and_says_what_the_topic_carries():
    topics = carried(Settings())
    assert topics["swarm.agents.heartbeats"] == {"AgentHeartbeat"}
    assert topics["swarm.waits"] == {"WaitStarted", "WaitEnded"}
    error = NotAnInput("TokensUsed e1 does not belong on swarm.waits", topic="swarm.waits", partition=0, offset=1)
    assert isinstance(error, DecodeError) and "swarm.waits[0]@1" in str(error)
