"""compare_traces: the alignment, the parting step, calls and arguments, flipped verdicts."""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

import pytest

from _helpers import TAU_BENCH, make_trace
from knowledgepulse import ReasoningTrace
from knowledgepulse.compare import (
    ArgumentChange,
    FieldChange,
    PartingStep,
    TraceComparison,
    compare_traces,
)
from knowledgepulse.compare._align import MAX_CELLS, lcs_pairs
from knowledgepulse.rubrics import RubricLoadError


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"type": "tool_call", "tool": {"name": name}, "input": arguments}


def result(text: str = "ok") -> dict[str, Any]:
    return {"type": "observation", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"type": "observation", "content": text, "source": "user"}


def say(text: str) -> dict[str, Any]:
    return {"type": "thought", "content": text}


def trace(
    *steps: Mapping[str, Any], trace_id: str = "kp:trace:a", **metadata: Any
) -> ReasoningTrace:
    data = make_trace([dict(step) for step in steps], trace_id=trace_id)
    data["metadata"].update(metadata)
    return ReasoningTrace.model_validate(data)


BEFORE = trace(
    user("Book me a seat on flight 12"),
    call("search_flights", number=12),
    result("flight 12: seats 12A, 14C"),
    call("book_seat", flight=12, seat="12A"),
    result("booked"),
    say("Your seat is booked."),
)
AFTER = trace(
    user("Book me a seat on flight 12"),
    call("search_flights", number=12),
    result("flight 12: seats 12A, 14C"),
    call("book_seat", flight=12, seat="14C"),
    result("booked"),
    call("send_email", to="me@example.com"),
    result("sent"),
    say("Your seat is booked."),
    trace_id="kp:trace:b",
)


def test_lcs_pairs_takes_prefix_suffix_and_the_earliest_match() -> None:
    assert lcs_pairs("abcxd", "abyd") == [(0, 0), (1, 1), (4, 3)]
    assert lcs_pairs("", "abc") == []
    assert lcs_pairs("aa", "a") == [(0, 0)]
    assert lcs_pairs("xaby", "zabw") == [(1, 1), (2, 2)]


def test_a_middle_too_large_for_the_table_is_matched_by_blocks() -> None:
    import random

    rng = random.Random(0)
    a = [rng.randrange(50) for _ in range(2_500)]
    b = [rng.randrange(50) for _ in range(2_500)]
    assert len(a) * len(b) > MAX_CELLS
    pairs = lcs_pairs(a, b)
    assert all(a[i] == b[j] for i, j in pairs)
    assert all(i0 < i1 and j0 < j1 for (i0, j0), (i1, j1) in pairwise(pairs))
    assert len(pairs) == 95  # common, not the longest: the price of a bounded time


def test_rows_part_at_the_call_with_other_arguments() -> None:
    c = compare_traces(BEFORE, AFTER)
    assert [(r.a.step if r.a else None, r.b.step if r.b else None, r.relation) for r in c.rows] == [
        (0, 0, "same"),
        (1, 1, "same"),
        (2, 2, "same"),
        (3, 3, "arguments_differ"),
        (4, 4, "same"),
        (None, 5, "only_b"),
        (None, 6, "only_b"),
        (5, 7, "same"),
    ]
    assert c.parting == PartingStep(
        row=3,
        step_a=3,
        step_b=3,
        relation="arguments_differ",
        reason="the same tool called with other arguments",
    )
    assert c.parting_call == c.parting
    assert c.same_steps == 5
    assert c.only_a_calls == []
    assert [(x.step, x.tool, x.arguments) for x in c.only_b_calls] == [
        (5, "send_email", {"to": "me@example.com"})
    ]
    assert c.argument_changes == [
        ArgumentChange(
            step_a=3,
            step_b=3,
            tool="book_seat",
            fields=[FieldChange(path="seat", a="12A", b="14C")],
        )
    ]
    assert not c.identical
    assert c.rubric is None and c.flipped == []
    assert c.a.steps == 6 and c.b.tool_calls == 3


def test_it_round_trips_through_json_and_renders_within_80_columns() -> None:
    c = compare_traces(BEFORE, AFTER, rubric="agent")
    again = TraceComparison.model_validate_json(c.model_dump_json(by_alias=True))
    assert again == c
    assert json.loads(c.model_dump_json(by_alias=True))["schema"] == "knowledgepulse.diff/1"
    text = c.render()
    assert max(len(line) for line in text.splitlines()) <= 80
    assert "Parted at step 3 of A, step 3 of B: the same tool called with other arguments." in text
    assert '    seat: "12A" -> "14C"' in text
    assert "  step 5: send_email" in text
    assert max(len(line) for line in c.render(50).splitlines()) <= 50


def test_copies_are_identical_with_no_parting() -> None:
    c = compare_traces(BEFORE, BEFORE.model_copy(update={"id": "kp:trace:copy"}))
    assert c.identical and c.copy_relation == "exact" and c.similarity == 1.0
    assert c.parting is None and c.parting_call is None
    assert "identical" in c.explanation
    assert "Identical: the two traces are exact copies" in c.render()


def test_traces_without_tool_calls_are_aligned_by_messages_and_say_so() -> None:
    a = trace(user("hi"), say("hello"), say("bye"))
    b = trace(user("hi"), say("hello there"), say("bye"), trace_id="kp:trace:b")
    c = compare_traces(a, b)
    assert [r.relation for r in c.rows] == ["same", "different", "same"]
    assert c.parting is not None and (c.parting.step_a, c.parting.step_b) == (1, 1)
    assert c.parting_call is None
    assert c.notes == [
        "A (kp:trace:a) made no tool call: aligned by its messages only",
        "B (kp:trace:b) made no tool call: aligned by its messages only",
    ]
    # The agent rubric reads them too: nothing to flip between two greetings.
    graded = compare_traces(a, b, rubric=True)
    assert (graded.rubric, graded.flipped, graded.notes) == ("agent", [], c.notes)
    assert "No criterion of the agent rubric flipped." in graded.render()


def test_a_run_that_stops_early_parts_where_it_ended() -> None:
    short = trace(user("Book me a seat on flight 12"), call("search_flights", number=12))
    c = compare_traces(short, BEFORE)
    assert c.parting is not None
    assert (c.parting.step_a, c.parting.step_b, c.parting.reason) == (
        None,
        2,
        "A ended here; B went on",
    )


def test_flipped_criteria_carry_reason_and_steps() -> None:
    # The second books without the user's consent: confirmed_before_write regresses.
    asked = trace(
        user("Book seat 12A"),
        say("Shall I book 12A?"),
        user("yes"),
        call("book_seat", seat="12A"),
        result("booked"),
        say("Booked."),
    )
    unasked = trace(
        user("Book seat 12A"),
        call("book_seat", seat="12A"),
        result("booked"),
        say("Booked."),
        trace_id="kp:trace:b",
    )
    c = compare_traces(asked, unasked, rubric=True)
    assert c.rubric == "agent"
    flips = {f.name: f for f in c.flipped}
    flip = flips["confirmed_before_write"]
    assert (flip.a, flip.b, flip.direction) == (True, False, "regressed")
    assert flip.steps_b == [1]
    assert "book_seat at step 1" in flip.reason_b
    assert c.flipped[0].direction == "regressed"
    text = c.render()
    assert "confirmed_before_write: regressed (passed on A, failed on B)" in text


def test_the_steps_of_a_flip_are_those_its_verdicts_name() -> None:
    # A check of one's own (a judged criterion alike) that names its steps in a Verdict: the
    # flip shows them, without running the check again.
    from knowledgepulse.rubrics import Case, Criterion, Rubric, Verdict

    runs: list[str] = []

    def no_other_seat(case: Case) -> Verdict:
        assert case.trace is not None
        runs.append(case.trace.id)
        booked = [s.step_id for s in case.trace.steps if (s.input or {}).get("seat") == "14C"]
        return Verdict(passed=not booked, reasoning="seat 14C booked", samples=0, steps=booked)

    def plain(case: Case) -> bool:
        return case.trace is not None and case.trace.id == "kp:trace:a"

    rubric = Rubric(
        "seats", [Criterion("no_14c", 0.5, no_other_seat), Criterion("plain", 0.5, plain)]
    )
    c = compare_traces(BEFORE, AFTER, rubric=rubric)
    assert [(f.name, f.direction, f.steps_a, f.steps_b) for f in c.flipped] == [
        ("no_14c", "regressed", [], [3]),
        ("plain", "regressed", [], []),
    ]
    assert runs == ["kp:trace:a", "kp:trace:b"]


def test_an_unknown_rubric_is_refused() -> None:
    with pytest.raises(RubricLoadError):
        compare_traces(BEFORE, AFTER, rubric="no_such_rubric")


def test_tau_bench_pairs_part_and_mixed_pairs_flip() -> None:
    from itertools import combinations

    from knowledgepulse.importers import ImportOptions, read_traces_from_paths

    conversions = read_traces_from_paths([str(TAU_BENCH)], "openai", ImportOptions())
    by_task: dict[int, list[ReasoningTrace]] = {}
    for t in (t for c in conversions for t in c.traces):
        task = (t.metadata.model_extra or {})["kp_import"]["task"]
        if task < 10:  # the first ten tasks: 60 pairs
            by_task.setdefault(task, []).append(t)
    parted = mixed = flipped_with_steps = 0
    for attempts in by_task.values():
        for a, b in combinations(attempts, 2):
            c = compare_traces(a, b, rubric=True)
            assert max(len(line) for line in c.render().splitlines()) <= 80, (a.id, b.id)
            parted += c.parting is not None
            if a.metadata.success != b.metadata.success:
                mixed += 1
                flipped_with_steps += any(f.steps_a or f.steps_b for f in c.flipped)
    assert parted == 60
    # 15 pairs where one attempt passed and one failed; in each a criterion of the agent
    # rubric flipped naming its steps.
    assert (mixed, flipped_with_steps) == (15, 15)


def test_the_tau_bench_pairs_that_once_showed_no_flip_with_a_step() -> None:
    from knowledgepulse.importers import ImportOptions, read_traces_from_paths

    conversions = read_traces_from_paths([str(TAU_BENCH)], "openai", ImportOptions())
    runs = {
        t.id.removeprefix("kp:trace:openai:tau-bench:"): t for c in conversions for t in c.traces
    }
    # Task 5: trial 1 (reward 1) made the three expected writes, its flights carrying origin
    # and destination the ground truth leaves out; trial 0 (reward 0) made one of them and
    # turned away from the others at step 15 ("basic economy flights cannot be modified").
    c = compare_traces(runs["task-5:trial-0"], runs["task-5:trial-1"], rubric=True)
    assert [(f.name, f.direction, f.steps_a, f.steps_b) for f in c.flipped] == [
        ("expected_actions", "improved", [15], [16, 18, 20])
    ]
    assert c.flipped[0].reason_b == (
        "the 3 expected state-changing calls were made (steps 16, 18, 20)"
    )
    # Task 44: only trial 2 (reward 1) told the user the expected "4", at step 6.
    c = compare_traces(runs["task-44:trial-1"], runs["task-44:trial-2"], rubric=True)
    assert [(f.name, f.direction, f.steps_a, f.steps_b) for f in c.flipped] == [
        ("expected_actions", "improved", [], [6])
    ]
    assert c.flipped[0].reason_a == "expected output '4' was never told to the user"
    assert c.flipped[0].reason_b.endswith("the 1 expected outputs were told (step 6)")
    assert c.parting is not None and (c.parting.step_a, c.parting.step_b) == (0, 0)


def test_both_results_validate_against_the_diff_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from knowledgepulse.compare import compare_evaluations, diff_schema
    from knowledgepulse.records import EvalRecord

    line = {
        "rubric": "agent",
        "case_id": "c1",
        "score": 1.0,
        "details": {"x": True},
        "weights": {"x": 1.0},
        "outcome_type": "successful_completion",
        "explanation": "",
    }
    evaluations = compare_evaluations(
        [EvalRecord.model_validate(line)], [EvalRecord.model_validate({**line, "score": 0.0})]
    )
    validator = jsonschema.Draft202012Validator(diff_schema())
    for result in (compare_traces(BEFORE, AFTER, rubric=True), evaluations):
        document = json.loads(result.model_dump_json(by_alias=True))
        assert sorted(e.message for e in validator.iter_errors(document)) == []
    assert list(validator.iter_errors({"schema": "knowledgepulse.diff/1", "kind": "other"}))
