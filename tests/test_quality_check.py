"""bench/quality/check.py: the committed task set loads, and answers are extracted, normalised and judged."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "bench"))
from quality.check import Problem, Verdict, extract, load, verdict, wilson

NUMBER = Problem("add-01", "What is 7 + 5? Answer with the number only.", "12", "number")
WORD = Problem("fact-01", "What is the capital of France? Answer with one word.", "paris", "word")
CHOICE = Problem("yesno-01", "Is 10 an even number? Answer yes or no.", "yes", "choice", ("yes", "no"))


def test_the_committed_set_has_100_distinct_problems_whose_expected_answers_pass_their_own_check() -> None:
    problems = load()

    assert len(problems) == 100 and len({p.id for p in problems}) == 100
    assert {p.check for p in problems} == {"number", "word", "choice"}
    assert all(verdict(p, p.answer) is Verdict.RIGHT for p in problems)
    assert len({p.kind for p in problems[:9]}) == 9, "a prefix mixes the kinds"


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        ("12", Verdict.RIGHT),
        ("7 + 5 = 12", Verdict.RIGHT),
        ("The answer is 12.", Verdict.RIGHT),
        ("12.0", Verdict.RIGHT),
        ("1,2", Verdict.RIGHT),  # commas are thousands separators: dropped
        ("The answer is 7.", Verdict.WRONG),
        ("twelve", Verdict.MALFORMED),
        ("", Verdict.MALFORMED),
        (None, Verdict.MALFORMED),
    ],
)
def test_a_number_is_the_last_number_of_the_output(output: str | None, expected: Verdict) -> None:
    assert verdict(NUMBER, output) is expected


def test_numbers_are_normalised_before_they_are_compared() -> None:
    assert extract(NUMBER, "it is 1,200.50 or -3.0") == "-3"
    assert extract(NUMBER, "0.50") == "0.5"
    assert verdict(Problem("d", "p", "0.5", "number"), "half: 0.50") is Verdict.RIGHT


def test_a_word_is_right_anywhere_in_the_output_whatever_its_case_and_punctuation() -> None:
    assert verdict(WORD, "The capital of France is PARIS.") is Verdict.RIGHT
    assert verdict(WORD, "Lyon") is Verdict.WRONG
    assert verdict(WORD, " ... ") is Verdict.MALFORMED


def test_a_choice_is_the_one_option_the_output_names() -> None:
    assert verdict(CHOICE, "Yes, it is even.") is Verdict.RIGHT
    assert verdict(CHOICE, "no") is Verdict.WRONG
    assert verdict(CHOICE, "yes or no") is Verdict.MALFORMED
    assert verdict(CHOICE, "10") is Verdict.MALFORMED


def test_an_invalid_task_line_is_refused_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"id": "a-1", "prompt": "p", "answer": "1", "check": "number"}\n')
    path.write_text(path.read_text() + '{"id": "a-2", "prompt": "p", "answer": "yes", "check": "choice"}\n')

    with pytest.raises(ValueError, match=r"tasks.jsonl:2"):
        load(path)


def test_the_wilson_interval_brackets_the_rate_and_stays_within_0_and_1() -> None:
    low, high = wilson(12, 100)
    assert low < 0.12 < high and round(low, 3) == 0.070 and round(high, 3) == 0.198
    assert wilson(0, 100)[0] == 0.0 and wilson(100, 100)[1] == pytest.approx(1.0)
    assert wilson(0, 0) == (0.0, 1.0)
