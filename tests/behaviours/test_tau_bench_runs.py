"""The agent rubric on real tau-bench airline conversations (tests/data/tau_bench_airline/,
MIT, see SOURCE.md there): runs cut at the step limit, the wrong write as the first failing
step, and where a run that never made an expected call turned away. Each run is graded
without its reward, as the benchmark grades it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from behaviours._traces import call, result, say, trace, user
from knowledgepulse import ReasoningTrace
from knowledgepulse.behaviours import (
    AGENT_RUBRIC,
    FailureSign,
    agent_rubric,
    expected_actions_match,
    failure_signs,
    task_completed,
    turned_away,
    unfinished,
)
from knowledgepulse.importers import convert
from knowledgepulse.rubrics import Case, EvaluationResult, OutcomeType

RUNS = Path(__file__).resolve().parents[1] / "data" / "tau_bench_airline" / "runs.json"


def airline(task: int, trial: int) -> ReasoningTrace:
    """The excerpt's run of ``task`` and ``trial``, imported without its reward."""
    records: list[dict[str, Any]] = json.loads(RUNS.read_text(encoding="utf-8"))
    (record,) = [r for r in records if (r["task_id"], r["trial"]) == (task, trial)]
    assert record["reward"] == 0.0
    (converted,) = convert("openai", {k: v for k, v in record.items() if k != "reward"})
    return converted


def graded(run: ReasoningTrace) -> EvaluationResult:
    return AGENT_RUBRIC.evaluate(Case(trace=run, case_id=run.id))


def test_a_run_cut_on_a_yes_the_agent_never_answered_is_not_successful() -> None:
    run = airline(46, 3)  # the expected send_certificate made; cut at the step limit
    evaluated = graded(run)
    assert evaluated.details["expected_actions"] is True
    assert evaluated.details["task_completed"] is False
    assert evaluated.verdicts["task_completed"].reasoning == (
        "the run ends on a user turn no agent step answered (step 60: 'Yes, I confirm the "
        "updated total. Please proceed with the bo'): it was cut before its end"
    )
    assert evaluated.verdicts["task_completed"].steps == [60]
    assert evaluated.outcome_type is OutcomeType.GRACEFUL_FAILURE
    assert evaluated.gate_passed is False


def test_a_run_cut_on_a_write_it_never_reported_is_not_successful() -> None:
    run = airline(2, 1)  # the five expected writes made; cut before telling the user
    evaluated = graded(run)
    assert evaluated.details["expected_actions"] is True
    assert task_completed(run).passed is False
    assert task_completed(run).reason == (
        "the run ends on the output of update_reservation_flights (step 61): no agent step "
        "reported it, so it was cut before its end"
    )
    assert evaluated.outcome_type is OutcomeType.GRACEFUL_FAILURE


def test_the_wrong_write_comes_before_an_earlier_write_without_consent() -> None:
    run = airline(0, 1)
    evaluated = graded(run)
    assert evaluated.verdicts["confirmed_before_write"].steps == [15, 19]
    assert evaluated.verdicts["expected_actions"].reasoning == (
        "step 19 book_reservation differs from the expected call in nonfree_baggages, "
        "payment_methods"
    )
    # The refused call at 15 lacked the user's yes, but the run went wrong by its ground
    # truth at 19: expected_actions locates the outcome, looked at before the causes.
    assert (evaluated.first_failing_step, evaluated.first_failing_criterion) == (
        19,
        "expected_actions",
    )


def test_an_expected_call_never_made_is_located_where_the_run_turned_away() -> None:
    run = airline(1, 0)
    finding = expected_actions_match(run)
    assert finding.passed is False
    assert finding.reason == (
        "expected cancel_reservation(reservation_id=Z7GOZK) was not made; the run turned away "
        "at step 2 (the agent declined: 'Unfortunately')"
    )
    assert finding.steps == (2,)
    assert (run.steps[2].content or "").startswith("Unfortunately, I need the reservation ID")
    evaluated = graded(run)
    assert (evaluated.first_failing_step, evaluated.first_failing_criterion) == (
        2,
        "expected_actions",
    )


def test_a_refused_call_to_the_missing_tool_is_where_the_run_turned_away() -> None:
    run = trace(
        say("I'm unable to change the date."),
        call("cancel_order", order_id="#W1"),
        result("Error: order is not pending", error=True),
        say("Done."),
        ground_truth={"actions": [{"name": "cancel_order", "kwargs": {"order_id": "#W2"}}]},
    )
    finding = expected_actions_match(run)
    assert finding.steps == (1,)
    assert finding.reason.endswith("the run turned away at step 1 (cancel_order refused)")
    assert expected_actions_match(run, decline_pattern="never matches").steps == (1,)
    assert turned_away(run, ["cancel_order"]) == (1, "cancel_order refused")
    assert turned_away(run, ["book"]) == (0, "the agent declined: 'unable to'")
    assert turned_away(run, ["book"], decline_pattern="never matches") is None
    silent = trace(say("Done."), ground_truth={"actions": [{"name": "cancel_order"}]})
    assert expected_actions_match(silent).steps == ()


@pytest.mark.parametrize(
    "closing",
    ["Thank you! ###STOP###", "Thanks, bye.", "thank you so much", "That's all I needed."],
)
def test_a_conversation_the_user_closes_is_finished(closing: str) -> None:
    assert unfinished(trace(user("Book it."), say("Booked."), user(closing))) is None


def test_the_ends_that_leave_a_run_unfinished() -> None:
    asked = trace(user("Book it."), say("Shall I?"), user("Yes, go ahead."))
    assert unfinished(asked) == FailureSign(
        "unfinished",
        "the run ends on a user turn no agent step answered (step 2: 'Yes, go ahead.'): it "
        "was cut before its end",
        (2,),
    )
    written = trace(user("Book F1."), call("book_flight", id="F1"), result("booked"))
    assert [sign.kind for sign in failure_signs(written)] == ["unfinished"]
    # Without a user turn the run is autonomous: its last call's output may end it.
    assert unfinished(trace(call("submit"), result("submitted"))) is None
    # A handoff, a scratch tool, a failed call (unrecovered_error says it) and an answer the
    # outcome keeps of its own end a run; so does a trace with no agent step at all.
    asking = user("Book F1.")
    assert unfinished(trace(asking, call("transfer_to_human_agents"), result("Moved"))) is None
    assert unfinished(trace(asking, call("think", thought="x"), result(""))) is None
    assert unfinished(trace(asking, call("book_flight"), result("Error", error=True))) is None
    booked = trace(asking, call("book_flight"), result("booked"), summary="Booked F1.")
    assert unfinished(booked) is None
    assert unfinished(trace(user("Hello?"))) is None
    assert unfinished(asked, closing_pattern="go ahead") is None


def test_the_closing_pattern_is_a_setting() -> None:
    asked = trace(user("Book it."), say("Shall I?"), user("Yes, go ahead."))
    relaxed = agent_rubric({"criteria": {"task_completed": {"closing_pattern": "go ahead"}}})
    assert relaxed.evaluate(Case(trace=asked, case_id="x")).details["task_completed"] is True
    assert AGENT_RUBRIC.evaluate(Case(trace=asked, case_id="x")).details["task_completed"] is False


def test_a_conversation_of_ten_thousand_steps_is_located_in_linear_time() -> None:
    # Bad input of issue 35: a run of 10^4 steps that never made its expected call, cut on a
    # user turn; the new checks read each step once.
    import time

    steps = []
    for i in range(2500):
        steps += [
            say(f"Looking at order {i}."),
            call("get_order", id=f"#W{i}"),
            result(f"order #W{i} is pending"),
            user("Please cancel it."),
        ]
    steps[-4] = say("Unfortunately, I cannot cancel orders.")
    truth = {"actions": [{"name": "cancel_order", "kwargs": {"id": "#W1"}}]}
    run = trace(*steps, ground_truth=truth)
    started = time.perf_counter()
    evaluated = AGENT_RUBRIC.evaluate(Case(trace=run, case_id="long"))
    assert time.perf_counter() - started < 20
    assert len(run.steps) == 10_000
    assert evaluated.verdicts["expected_actions"].steps == [9996]
    assert evaluated.verdicts["task_completed"].steps == [9999]
    assert (evaluated.first_failing_criterion, evaluated.first_failing_step) == (
        "expected_actions",
        9996,
    )
