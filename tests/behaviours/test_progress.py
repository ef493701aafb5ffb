"""Where a run went wrong without tool-level ground truth: no_failed_calls, made_progress and
expected_answer, on real Who&When runs (MIT, tests/data/who_and_when/SOURCE.md) and by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from behaviours._traces import call, result, say, trace, user
from knowledgepulse import ReasoningTrace
from knowledgepulse.behaviours import (
    AGENT_RUBRIC,
    Finding,
    Stall,
    answer_matches,
    expected_answer_given,
    failed_calls,
    given_answer,
    made_progress,
    no_failed_calls,
    stalls,
)
from knowledgepulse.importers import convert
from knowledgepulse.rubrics import Case, Criterion, OutcomeType, Rubric, Verdict
from knowledgepulse.rubrics._criterion import first_failure

WHO = Path(__file__).resolve().parents[2] / "tests" / "data" / "who_and_when"


def who(name: str) -> tuple[ReasoningTrace, dict[str, object]]:
    record = json.loads((WHO / f"{name}.json").read_text(encoding="utf-8"))
    (converted,) = convert("who-and-when", record)
    return converted, record


def test_a_magentic_one_ledger_reporting_a_loop_names_the_websurfer_step_people_blame() -> None:
    run, record = who("hand-crafted-1")
    # The people: WebSurfer, step 12 ("clicks on an irrelevant website").
    assert (record["mistake_agent"], record["mistake_step"]) == ("WebSurfer", "12")
    found = stalls(run)
    assert [(stall.judged, stall.report) for stall in found] == [(12, 13), (20, 21), (24, 25)]
    assert found[0] == Stall(13, 12, "is_in_loop: true")
    assert made_progress(run) == Finding(
        False,
        "step 13 reports no progress ('is_in_loop: true') after step 12; 2 later reports",
        (12, 13, 21, 25),
    )
    evaluated = AGENT_RUBRIC.evaluate(Case(trace=run, case_id=run.id))
    assert (
        evaluated.first_failing_criterion,
        evaluated.first_failing_step,
        evaluated.first_failing_agent,
    ) == ("made_progress", 12, "WebSurfer")
    # Importer step 12 is history[12]: the people's coordinates.
    assert (run.steps[12].model_extra or {})["message_index"] == 12
    # Its FINAL ANSWER is not the expected one: never a successful completion.
    assert evaluated.verdicts["expected_answer"].reasoning == (
        "the answer (step 28) 'Alliance Jiu Jitsu, NY Jidokwan Taekwondo' is not the expected "
        "'Renzo Gracie Jiu-Jitsu Wall Street', following the plan of step 1"
    )
    assert evaluated.outcome_type is OutcomeType.GRACEFUL_FAILURE and evaluated.score == 1.0


def test_code_that_failed_names_the_agent_that_wrote_it() -> None:
    run, record = who("algorithm-generated-10")
    assert (record["mistake_agent"], record["mistake_step"]) == ("Validation_Expert", "5")
    assert failed_calls(run) == [(5, 6)]
    assert no_failed_calls(run) == Finding(
        False, "the call at step 6 failed (after step 5)", (5, 6)
    )
    evaluated = AGENT_RUBRIC.evaluate(Case(trace=run, case_id=run.id))
    # Recovered later, so errors_recovered passes; the failed call still says where it began.
    assert evaluated.details["errors_recovered"] is True
    assert (
        evaluated.first_failing_criterion,
        evaluated.first_failing_step,
        evaluated.first_failing_agent,
    ) == ("no_failed_calls", 5, "Validation_Expert")
    answer, step = given_answer(run)
    assert step == 9 and answer.startswith("The population difference between Seattle")
    assert expected_answer_given(run).passed is False


def test_without_a_failure_located_a_wrong_answer_names_the_plan_the_run_followed() -> None:
    run = trace(
        say("Plan: look the figure up, then report it."),
        say("The figure is 57."),
        say("TERMINATE"),
        ground_truth={"answer": "58"},
    )
    assert given_answer(run) == ("The figure is 57.", 1)
    assert expected_answer_given(run) == Finding(
        False,
        "the answer (step 1) 'The figure is 57.' is not the expected '58', following the plan "
        "of step 0",
        (0, 1),
    )
    evaluated = AGENT_RUBRIC.evaluate(Case(trace=run))
    assert (evaluated.first_failing_criterion, evaluated.first_failing_step) == (
        "grounded_statements",
        1,
    )  # evidence (57 from nowhere) comes before a symptom
    assert evaluated.outcome_type is not OutcomeType.SUCCESSFUL_COMPLETION
    right = trace(say("Plan."), say("It is 41."), ground_truth={"answer": 41})
    assert expected_answer_given(right) == Finding(
        True, "the answer (step 1) gives the expected '41'", (1,)
    )


@pytest.mark.parametrize(
    ("answer", "expected", "given"),
    [
        ("FINAL ANSWER: 1,194.00", "1194", True),
        ("x = 5, then 12 steps later the result is 3", "3", True),
        ("print(check) # should print '0'", "3", False),  # the last number decides
        ("The answer is CSI: Cyber.", "CSI Cyber", True),
        ("Yosemite Falls and Bridalveil Fall", "Yosemite Falls\nBridalveil Fall", True),
        ("Yosemite Falls only", "Yosemite Falls\nBridalveil Fall", False),
        ("shrimpy", "shrimp", False),  # words, not letters
        ("", "x", False),
    ],
)
def test_answer_matches(answer: str, expected: str, given: bool) -> None:
    assert answer_matches(answer, expected) is given


def test_the_answer_is_the_final_answer_line_else_a_summary_else_the_last_message() -> None:
    marked = trace(say("Working."), say("Done.\nFINAL ANSWER: Paris\nRUN COMPLETE"), say("ok"))
    assert given_answer(marked) == ("Paris", 1)
    summarised = trace(say("Working."), summary="Berlin")
    assert given_answer(summarised) == ("Berlin", None)
    # A summary copying the last thought (what importers write) is that thought's answer.
    copied = trace(say("Rome"), say("TERMINATE"), summary="TERMINATE")
    assert given_answer(copied) == ("Rome", 0)
    assert given_answer(trace(say("TERMINATE"))) == ("", None)
    assert expected_answer_given(trace(say("TERMINATE"), ground_truth={"answer": "x"})) == (
        Finding(False, "the run gives no answer; expected 'x'")
    )
    assert expected_answer_given(trace(say("x"))) == Finding(
        None, "the trace has no expected answer in metadata.ground_truth.answer"
    )


def test_a_stall_said_in_prose_by_a_single_agent_names_its_previous_step() -> None:
    run = trace(
        call("search", q="a"),
        result("nothing"),
        say("We are stuck: the search returns nothing."),
        say("Trying once more."),
    )
    assert stalls(run) == [Stall(2, 0, "We are stuck")]
    assert made_progress(run).steps == (0, 2)
    assert made_progress(trace(say("Going well."))) == Finding(
        True, "none of the 1 agent messages reports a stall"
    )
    assert made_progress(trace(call("x"), result())) == Finding(
        None, "the trace has no agent message"
    )
    # A ledger saying progress is being made is no stall.
    ledger = '{"is_progress_being_made": {"reason": "found it", "answer": true}}'
    assert stalls(trace(say(ledger))) == []


def test_no_failed_calls_counts_recovered_failures_and_needs_tool_output() -> None:
    run = trace(call("get", id="1"), result("boom", error=True), call("get", id="2"), result())
    assert no_failed_calls(run) == Finding(
        False, "the call at step 1 failed (after step 0)", (0, 1)
    )
    # Parallel calls: the error answers the first call, named as its cause (not the step
    # just before the error, the second call).
    parallel = trace(call("get", id="1"), call("put", id="2"), result("no", error=True), result())
    assert failed_calls(parallel) == [(0, 2)]
    # A tool's output saying "FINAL ANSWER:" is no answer of the run's.
    quoted = trace(call("read"), result("FINAL ANSWER: 7"), say("It is 8."))
    assert given_answer(quoted) == ("It is 8.", 2)
    assert no_failed_calls(trace(call("get"), result("ok"), user("thanks"))) == Finding(
        True, "none of the 1 tool outputs is an error"
    )
    assert no_failed_calls(trace(say("hi"), user("hello"))) == Finding(
        None, "the trace has no tool output"
    )


def test_the_first_failing_step_looks_at_causes_then_evidence_then_symptoms() -> None:
    failed = {
        "budget": Verdict(passed=False, steps=[1]),
        "figure": Verdict(passed=False, steps=[2]),
        "call": Verdict(passed=False, steps=[5]),
    }
    kinds = {"budget": "symptom", "figure": "evidence", "call": "cause"}
    assert first_failure(failed, {"budget": 1.0}, kinds) == (5, "call")
    assert first_failure(failed, {"budget": 1.0}, {"budget": "symptom", "figure": "evidence"}) == (
        5,
        "call",
    )
    assert first_failure(failed, None, {**kinds, "call": "symptom"}) == (2, "figure")
    assert first_failure(failed) == (1, "budget")  # without kinds, all are causes
    with pytest.raises(
        ValueError, match="locates must be one of outcome, cause, evidence, symptom"
    ):
        Criterion("x", 1.0, lambda case: True, locates="reason")
    rubric = Rubric(
        "r",
        [
            Criterion("budget", 0.5, lambda case: Verdict(passed=False, steps=[1]), "b", "symptom"),
            Criterion("call", 0.5, lambda case: Verdict(passed=False, steps=[5]), "c"),
        ],
    )
    assert rubric.evaluate(Case(trace=trace(say("a")))).first_failing_step == 5


def test_an_expected_answer_that_is_not_text_leaves_the_criterion_undetermined() -> None:
    listed = trace(say("a, b"), ground_truth={"answer": ["a", "b"]})
    assert expected_answer_given(listed) == Finding(
        None, "metadata.ground_truth.answer is list, not a text or a number to compare"
    )
    flagged = trace(say("yes"), ground_truth={"answer": True})
    assert expected_answer_given(flagged).reason == (
        "metadata.ground_truth.answer is true or false, not a text or a number to compare"
    )
    assert expected_answer_given(trace(say("x"), ground_truth={"answer": "  "})).passed is None


def test_ten_thousand_steps_of_one_agent_reporting_stalls_are_read_in_linear_time() -> None:
    # Bad input of issue 35: every message a stall report by the same agent, every second
    # observation failed; each check is one pass.
    import time

    steps = []
    for i in range(2500):
        steps += [
            {"type": "thought", "content": f"We are stuck again ({i})", "agent": "Planner"},
            {"type": "thought", "content": "run it", "agent": "Coder"},
            result("exitcode: 1", error=True),
            {"type": "thought", "content": "not making progress", "agent": "Planner"},
        ]
    run = trace(*steps)
    started = time.perf_counter()
    found = stalls(run)
    failed = failed_calls(run)
    assert time.perf_counter() - started < 5  # about 0.05 s
    assert len(run.steps) == 10_000 and len(found) == 5000 and len(failed) == 2500
    # The first report has nothing before it to judge; each later one judges Coder's step.
    assert found[0] == Stall(0, 0, "We are stuck")
    assert found[1] == Stall(3, 1, "not making progress")
    assert found[2] == Stall(4, 1, "We are stuck")
    assert failed[:2] == [(1, 2), (5, 6)]


def test_a_rubric_file_can_say_what_a_criterion_locates() -> None:
    from knowledgepulse.behaviours import RubricSettingsError, agent_rubric

    rubric = agent_rubric({"criteria": {"within_budget": {"locates": "cause", "max_steps": 1}}})
    budget = next(c for c in rubric.criteria if c.name == "within_budget")
    assert budget.locates == "cause"
    evaluated = rubric.evaluate(Case(trace=trace(say("The total is 57."), say("Done, 57."))))
    # Now a cause, the budget's step (1) comes before the figure stated from nowhere (0 is
    # evidence): causes are looked at first.
    assert (evaluated.first_failing_criterion, evaluated.first_failing_step) == (
        "within_budget",
        1,
    )
    with pytest.raises(RubricSettingsError, match=r"criteria\.answered\.locates: expected one"):
        agent_rubric({"criteria": {"answered": {"locates": "blame"}}})
