"""Plans: a planner's JSON answer becomes a DAG of WORK specs, or a reason why not."""

import json

import pytest

from swarmlog.coordinator.plan import parse


def test_a_valid_plan_becomes_specs_in_order():
    answer = json.dumps(
        [
            {"task_id": "gen", "prompt": "write", "required_capabilities": ["code"], "depends_on": []},
            {"task_id": "rev", "prompt": "review", "required_capabilities": [], "depends_on": ["gen"], "replicas": 2},
        ]
    )
    specs = parse(answer)
    assert [(s.task_id, s.depends_on, s.replicas, s.max_steps) for s in specs] == [
        ("gen", (), 1, 4),
        ("rev", ("gen",), 2, 4),
    ]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("not json", "not JSON"),
        ("{}", "JSON list"),
        ("[]", "no tasks"),
        ('[{"task_id": "a"}]', "malformed"),
        ('[{"task_id": "a", "prompt": "p", "depends_on": "b"}]', "malformed"),
        ('[{"task_id": "a", "prompt": "p", "depends_on": ["b"]}]', "unknown tasks"),
        ('[{"task_id": "a", "prompt": "p", "depends_on": ["a"]}]', "cycle"),
        ('[{"task_id": "@final", "prompt": "p"}]', "reserved"),
        ('[{"task_id": "a", "prompt": "p"}, {"task_id": "a", "prompt": "q"}]', "duplicate"),
    ],
)
def test_an_invalid_plan_says_why(answer, reason):
    assert reason in parse(answer)
