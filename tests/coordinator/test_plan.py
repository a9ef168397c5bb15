"""Plans: a planner's JSON answer becomes a DAG of WORK specs, or a reason why not."""

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from swarmlog.coordinator.plan import parse, problem
from swarmlog.coordinator.state import TaskSpec


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


def _stuck_by_search(edges: dict[str, set[str]]) -> set[str]:
    """The tasks that can never run: those on a dependency cycle, or depending (transitively) on one."""

    def reachable(task: str) -> set[str]:
        seen, todo = set(), list(edges[task])
        while todo:
            if (dependency := todo.pop()) not in seen:
                seen.add(dependency)
                todo.extend(edges[dependency])
        return seen

    on_cycle = {task for task in edges if task in reachable(task)}
    return {task for task in edges if task in on_cycle or reachable(task) & on_cycle}


@given(
    st.integers(1, 9).flatmap(lambda n: st.lists(st.sets(st.integers(0, n - 1), max_size=3), min_size=n, max_size=n))
)
def test_the_cycle_check_names_exactly_the_tasks_a_search_finds_stuck(dependencies: list[set[int]]):
    edges = {f"t{index}": {f"t{d}" for d in deps} for index, deps in enumerate(dependencies)}
    specs = [TaskSpec(task, "p", depends_on=tuple(sorted(deps))) for task, deps in edges.items()]
    stuck = _stuck_by_search(edges)
    assert problem(specs) == (f"dependency cycle among {sorted(stuck)}" if stuck else None)
