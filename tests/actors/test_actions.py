"""The action schema and parser: valid actions round-trip, anything else is Malformed, nothing raises."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from swarmlog.actors.actions import ACTIONS, ASK, VOTE, Action, Malformed, action_schema, parse_action


def test_an_answer_parses():
    assert parse_action('{"action": "answer", "content": "4", "confidence": 0.9}') == Action("answer", "4", 0.9)


def test_ask_needs_a_target_and_vote_a_known_candidate():
    assert parse_action('{"action": "ask", "content": "?", "confidence": 1}') == Malformed(
        "ask needs exactly the fields action, confidence, content, target, got action, confidence, content"
    )
    vote = '{"action": "vote", "content": "", "confidence": 1, "candidate_id": "c9"}'
    assert isinstance(parse_action(vote, (VOTE,), ("c1", "c2")), Malformed)
    assert parse_action(vote, (VOTE,), ("c9",)).candidate_id == "c9"


def test_an_action_not_offered_is_malformed():
    assert parse_action('{"action": "remember", "content": "x", "confidence": 1}', ("answer",)) == Malformed(
        "action 'remember' is not one of answer"
    )


def test_confidence_is_clamped_and_must_be_finite():
    assert parse_action('{"action": "answer", "content": "x", "confidence": 7}').confidence == 1.0
    assert isinstance(parse_action('{"action": "answer", "content": "x", "confidence": NaN}'), Malformed)
    assert isinstance(parse_action('{"action": "answer", "content": "x", "confidence": true}'), Malformed)


def test_truncated_output_is_malformed():
    assert parse_action('{"action": "answer", "content": "x').reason.startswith("not JSON")


def test_the_schema_lists_one_variant_per_allowed_action_with_the_action_first():
    schema = action_schema((ASK, VOTE), ("c1",))
    assert [next(iter(v["properties"])) for v in schema["oneOf"]] == ["action", "action"]
    assert schema["oneOf"][1]["properties"]["candidate_id"] == {"enum": ["c1"]}


@given(st.text())
def test_parse_action_never_raises_on_any_text(text):
    assert isinstance(parse_action(text), Action | Malformed)


json_values = st.recursive(
    st.none() | st.booleans() | st.floats() | st.text(),
    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    max_leaves=10,
)


@given(
    st.dictionaries(
        st.sampled_from(["action", "content", "confidence", "target", "candidate_id", "x"]),
        json_values | st.sampled_from(ACTIONS),
    )
)
def test_parse_action_never_raises_on_any_json_object(value):
    assert isinstance(parse_action(json.dumps(value)), Action | Malformed)


@given(st.sampled_from([a for a in ACTIONS]), st.text(max_size=300), st.floats(0, 1), st.text(min_size=1, max_size=64))
def test_every_valid_action_round_trips(kind, content, confidence, extra):
    value = {"action": kind, "content": content, "confidence": confidence}
    if kind == ASK:
        value["target"] = extra
    if kind == VOTE:
        value["candidate_id"] = extra
    assert parse_action(json.dumps(value)) == Action(
        kind, content, confidence, value.get("target"), value.get("candidate_id")
    )


def test_raw_control_characters_inside_a_string_still_parse() -> None:
    action = parse_action('{ "action": "answer", "content": "line one\nline two", "confidence": 0.5 }')

    assert isinstance(action, Action)
    assert action.content == "line one\nline two"
