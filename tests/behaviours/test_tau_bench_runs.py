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
    state_changing_calls,
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
    [
        "Thank you! ###STOP###",
        "Thanks, bye.",
        "thank you so much",
        "That's all I needed.",
        # tau2's simulated user, closing a real run (tests/data/importers/tau2/hotel_calle_gemma3)
        "That's perfect, thank you so much for your help! I think that's everything.",
    ],
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
    # So does a call delivering the result: Terminus-2 runs end on the terminal's
    # output after mark_task_complete (Harbor's ATIF trajectories).
    done = trace(asking, call("mark_task_complete"), result("New Terminal Output:"))
    assert unfinished(done) is None
    assert unfinished(done, final_tools=[]) is not None
    assert unfinished(trace(asking, call("book_flight"), result("Error", error=True))) is None
    booked = trace(asking, call("book_flight"), result("booked"), summary="Booked F1.")
    assert unfinished(booked) is None
    assert unfinished(trace(user("Hello?"))) is None
    assert unfinished(asked, closing_pattern="go ahead") is None


def test_a_run_its_own_record_says_the_user_or_agent_ended_is_finished() -> None:
    # tau2 records why a run stopped: user_stop and agent_stop are a conversation that ended
    # itself (a real run ends on "Okay, S/ 185.5. That's good to know. Thank you for letting
    # me know it's in stock", which no closing words catch), max_steps one that was cut.
    said = (user("Is JD-101 in stock?"), say("Yes, at S/ 185.50."), user("Okay, S/ 185.5. Good."))
    kept = trace(*said).to_dict()
    kept["metadata"]["kp_import"] = {"termination_reason": "user_stop"}
    assert unfinished(ReasoningTrace.model_validate(kept)) is None
    kept["metadata"]["kp_import"] = {"termination_reason": "agent_stop"}
    assert unfinished(ReasoningTrace.model_validate(kept)) is None
    kept["metadata"]["kp_import"] = {"termination_reason": "max_steps"}
    assert unfinished(ReasoningTrace.model_validate(kept)) is not None
    assert unfinished(trace(*said)) is not None


def test_a_check_is_a_read() -> None:
    # tau2's hotel domain checks a room's availability before booking: not a write to consent
    # to, nor one the database comparison counts.
    # A tool the expected actions name counts as a write unless its name reads.
    truth = {"actions": [{"name": "check_room_availability"}, {"name": "create_reservation"}]}
    asked = trace(
        user("A suite for two?"),
        call("check_room_availability", room="suite"),
        call("create_reservation", room="suite"),
        ground_truth=truth,
    )
    assert [c.name for c in state_changing_calls(asked)] == ["create_reservation"]


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


TAU2 = Path(__file__).resolve().parents[1] / "data" / "importers" / "tau2"


def test_the_outcome_agrees_with_tau2s_reward_on_real_runs() -> None:
    # Five real tau2 runs (SOURCE.md beside them), graded without their reward_info: their
    # tasks gate the reward on DB and COMMUNICATE (retail), ACTION and COMMUNICATE (hotel) or
    # COMMUNICATE alone. Before the reward basis was read, 2 of the 5 agreed.
    seen: list[tuple[str, float, str]] = []
    for path in sorted(TAU2.glob("*.json")):
        results = json.loads(path.read_text(encoding="utf-8"))
        rewards = {}
        for simulation in results["simulations"]:
            rewards[(simulation["task_id"], simulation.get("trial", 0))] = simulation.pop(
                "reward_info"
            )["reward"]
        for made in convert("tau2", results):
            imported = (made.metadata.model_extra or {})["kp_import"]
            reward = rewards[(imported["task"], imported["trial"])]
            outcome = AGENT_RUBRIC.evaluate(Case(trace=made, case_id=made.id)).outcome_type
            seen.append((imported["task"], reward, str(outcome)))
    assert sorted(seen) == [
        ("0", 1.0, "successful_completion"),
        ("2", 0.0, "partial_failure"),
        ("hotel_availability_suite_may", 0.0, "partial_failure"),
        ("hotel_cheapest_room_for_two", 1.0, "successful_completion"),
        ("hotel_price_family_april", 1.0, "successful_completion"),
    ]
