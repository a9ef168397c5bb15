"""bench/quality_bench.py on the real model, small: two problems with replicas 1, 3 and 3 by vote (the pipeline, not
the rates)."""

from __future__ import annotations

import importlib.util
import io
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from quality.check import verdict
from quality_bench import main


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="llama_cpp is not importable: pip install 'swarmlog[llamacpp]'",
)
async def test_two_problems_are_answered_checked_and_cross_checked_with_replicas_3() -> None:
    printed = io.StringIO()

    rows = await main(["--tasks", "2", "--replicas", "1,3", "--checks", "EQUAL,VOTE"], Console(file=printed, width=250))

    single, checked, voted = rows
    assert [(row.replicas, row.check) for row in rows] == [(1, "EQUAL"), (3, "EQUAL"), (3, "VOTE")]
    for row in rows:
        assert [outcome.problem.id for outcome in row.outcomes] == ["echo-01", "fact-01"]
        assert all(outcome.verdict is verdict(outcome.problem, outcome.output) for outcome in row.outcomes)
        assert all(outcome.tokens > 0 for outcome in row.outcomes) and row.wall_s > 0
    # Every replicated task is cross-checked in the journal (agreed, or a tie-breaker and then a settled outcome);
    # a single replica never is.
    for replicated in (checked, voted):
        assert all(outcome.checks for outcome in replicated.outcomes)
        assert all(outcome.checks[-1] in ("AGREED", "DISPUTED") for outcome in replicated.outcomes)
        assert replicated.tokens > single.tokens
    assert not any(outcome.checks for outcome in single.outcomes)
    # Equality breaks ties with one more replica; a vote never does: outputs that differ go to a ballot.
    assert all(check in ("AGREED", "TIE_BREAK", "DISPUTED") for outcome in checked.outcomes for check in outcome.checks)
    assert all(check in ("AGREED", "BALLOT", "DISPUTED") for outcome in voted.outcomes for check in outcome.checks)
    table = printed.getvalue()
    assert "Cross-checking on the quality task set" in table
    assert "│ 1  " in table and "│ 3 + tie-breaker" in table and "│ 3 + vote" in table and "baseline" in table
