"""The journal fold by offset: undecodable records are noted, never guessed; a repair event passes over exactly them."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.coordinator.journal import FoldedJournal, Unreadable, skip_of
from swarmlog.schemas.codec import default_codec
from swarmlog.schemas.events import Event
from swarmlog.schemas.records import JournalRecordsSkipped

from .harness import T0, Swarm, make, task


def decisions() -> list[Event]:
    """A region's journal: an agent enlisted, a mission accepted and its task assigned."""
    swarm = Swarm()
    swarm.register("a", "code")
    swarm.submit("m", [task("t", "code")])
    return swarm.journal


def repair(*offsets: int, reason: str = "garbage from a test", operator: str = "ops") -> JournalRecordsSkipped:
    """The JournalRecordsSkipped `swarmlog coordinator repair` writes."""
    return make(
        JournalRecordsSkipped,
        event_id=f"repair-{offsets}",
        occurred_at=T0 + 60_000,
        producer=f"operator:{operator}",
        region="eu",
        partition=0,
        offsets=list(offsets),
        errors=["bad magic"] * len(offsets),
        reason=reason,
        operator=operator,
    )


def fold(entries: list[Event | str]) -> FoldedJournal:
    """The journal fold over entries at offsets 0, 1, …: an Event decoded there, a string is why it did not."""
    folded = FoldedJournal(Swarm().start)
    for offset, entry in enumerate(entries):
        folded = folded.pass_over(offset, entry) if isinstance(entry, str) else folded.fold(entry, offset)
    return folded


def test_an_undecodable_record_is_noted_and_unresolved_and_the_rest_is_still_folded():
    journal = decisions()
    # given a garbage record among the decisions
    folded = fold([journal[0], "bad magic", *journal[1:]])
    # then it is unresolved, and every decision around it is folded as if it were not there
    assert folded.unresolved == (Unreadable(1, "bad magic"),)
    assert folded.state == fold(journal).state
    assert folded.offset == len(journal)


def test_a_repair_that_names_the_record_resolves_it_and_changes_no_state():
    journal = decisions()
    # given a garbage record at offset 1 and, later, the repair that names it
    folded = fold([journal[0], "bad magic", *journal[1:], repair(1)])
    # then nothing is unresolved, the record is skipped by that repair, and the state is the decisions' alone
    assert folded.unresolved == ()
    assert folded.skipped[1].at == len(journal) + 1 and folded.skipped[1].operator == "ops"
    assert folded.state == fold(journal).state
    assert folded.tip == (len(journal) + 1, repair(1).event_id)


def test_a_repair_is_not_a_decision_the_last_decision_s_messages_are_still_re_sent():
    journal = decisions()
    before = fold(["bad magic", *journal])
    after = before.fold(repair(0), len(journal) + 1)
    assert after.last == before.last and after.last[-1] == journal[-1]


def test_a_repair_never_skips_a_record_that_decodes():
    journal = decisions()
    # given a repair naming the offset of a decision
    folded = fold([*journal, repair(0)])
    # then the decision is folded all the same
    assert folded.state == fold(journal).state
    assert folded.skipped == {}


def test_a_repair_covers_only_offsets_before_its_own():
    journal = decisions()
    at = len(journal)
    # given a repair naming the offset after its own, and garbage landing there later
    folded = fold([*journal, repair(at + 1), "bad magic"])
    # then that garbage is not pre-approved
    assert folded.unresolved == (Unreadable(at + 1, "bad magic"),)
    assert skip_of(repair(at + 1), at).offsets == frozenset()


def test_records_left_out_of_a_repair_stay_unresolved():
    folded = fold(["bad", "worse", *decisions(), repair(1)])
    assert folded.unresolved == (Unreadable(0, "bad"),)
    assert set(folded.skipped) == {1}


def test_the_repair_event_round_trips_through_the_codec():
    codec = default_codec()
    event = repair(3, 7)
    decoded = codec.decode(codec.encode(event))
    assert decoded == event and decoded.offsets == [3, 7] and decoded.operator == "ops"


@given(st.lists(st.booleans(), max_size=30), st.data())
def test_snapshot_plus_tail_equals_the_whole_fold(garbage_at: list[bool], data: st.DataObject):
    journal = iter(decisions() * 10)
    entries: list[Event | str] = [f"bad {i}" if bad else next(journal) for i, bad in enumerate(garbage_at)]
    entries.append(repair(*[i for i, bad in enumerate(garbage_at) if bad]))
    cut = data.draw(st.integers(0, len(entries)))
    snapshot = fold(entries[:cut])
    resumed = snapshot
    for offset, entry in enumerate(entries[cut:], start=cut):
        resumed = resumed.pass_over(offset, entry) if isinstance(entry, str) else resumed.fold(entry, offset)
    assert resumed == fold(entries)
    assert resumed.unresolved == ()


def test_the_last_write_s_events_are_last_whatever_decisions_it_holds():
    journal = decisions()
    # given the enlistment as one write, and the mission's decision and then the enlistment's again as another
    folded = FoldedJournal(Swarm().start).fold(journal[0], 0, "w1")
    for offset, event in enumerate([*journal[1:], journal[0]], start=1):
        folded = folded.fold(event, offset, "w2")
    # then every event of the second write is last (its messages are re-sent after a crash), across its decisions
    assert folded.last == (*journal[1:], journal[0]) and folded.write == "w2"


def test_records_of_no_named_write_are_grouped_by_their_decision_as_before():
    journal = decisions()
    assert fold(journal).last == tuple(e for e in journal if e.causation_id == journal[-1].causation_id)
    # and the first named write after them starts a group of its own
    assert fold(journal).fold(journal[0], len(journal), "w").last == (journal[0],)


def test_a_write_folded_at_once_equals_its_events_folded_one_by_one():
    journal = decisions()
    swarm = Swarm()
    one_by_one = FoldedJournal(swarm.start)
    for offset, event in enumerate(journal):
        one_by_one = one_by_one.fold(event, offset, "w")
    at_once = FoldedJournal(swarm.start).written("w", journal, range(len(journal)), one_by_one.state)
    assert at_once == one_by_one
