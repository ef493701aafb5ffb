"""task_completed: failure seen from the trace itself when no expected actions are given."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from behaviours._traces import call, result, say, trace
from knowledgepulse import ReasoningTrace
from knowledgepulse.behaviours import (
    AGENT_RUBRIC,
    FailureSign,
    Finding,
    agent_rubric,
    failure_signs,
    final_answer,
    task_completed,
)
from knowledgepulse.rubrics import Case, OutcomeType

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "traces.jsonl"


def run(*steps: Any, summary: str = "", success: bool = True, **metadata: Any) -> ReasoningTrace:
    """A trace whose success flag came from its source, with ``metadata`` added."""
    made = trace(*steps, summary=summary)
    data = made.to_dict()
    data["metadata"]["success"] = success
    data["metadata"].update(metadata)
    return ReasoningTrace.model_validate(data)


def test_every_example_whose_record_says_it_failed_is_not_a_successful_completion() -> None:
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()
    traces = [ReasoningTrace.model_validate(json.loads(line)) for line in lines if line.strip()]
    outcomes = {t.id: AGENT_RUBRIC.evaluate(Case(trace=t, case_id=t.id)) for t in traces}
    failed = sorted(t.id for t in traces if not t.metadata.success)
    assert failed == [
        "kp:trace:dpa-art28-vendor-x",
        "kp:trace:renal-dose-enoxaparin-timeout",
        "kp:trace:sqlalchemy-2-upgrade-canary-fail",
        "kp:trace:tf-drift-staging-network",
    ]
    for trace_id in failed:
        assert outcomes[trace_id].details["task_completed"] is False
        assert outcomes[trace_id].outcome_type is not OutcomeType.SUCCESSFUL_COMPLETION
    # The runs that say they succeeded show no sign of failure.
    assert [t for t in outcomes if t not in failed and outcomes[t].details["task_completed"]] == [
        t.id for t in traces if t.metadata.success
    ]
    renal = outcomes["kp:trace:renal-dose-enoxaparin-timeout"]
    assert renal.score == 0.75 and renal.outcome_type is OutcomeType.GRACEFUL_FAILURE
    assert renal.verdicts["task_completed"].reasoning == (
        "the trace's own metadata.success is false; the final answer admits failure "
        "('Could not': 'Could not retrieve dosing protocol (tool timeouts); escalate'); "
        "the final answer hands the task over ('escalated') without a state-changing call "
        "having succeeded"
    )
    assert (
        "The success gate (the expected actions were taken, the expected answer given, and "
        "the trace shows no sign of failure) did not hold" in renal.explanation
    )


def test_a_clean_run_passes_and_expected_actions_leave_it_undetermined() -> None:
    clean = run(call("search", q="x"), result("found"), say("Here is the answer."))
    assert task_completed(clean) == Finding(
        True,
        "no sign of failure: no false success flag, no admission or handoff in the final "
        "answer, no failed last call, no budget stop, no end left unanswered",
    )
    graded = trace(say("I could not do it."), ground_truth={"actions": []})
    assert task_completed(graded) == Finding(
        None,
        "the task's expected actions decide the outcome (expected_actions), and the run got "
        "to its end",
    )


def test_a_success_flag_defaulted_on_import_says_nothing() -> None:
    flagged = run(say("Done."), success=False)
    assert [sign.kind for sign in failure_signs(flagged)] == ["success_flag"]
    data = flagged.to_dict()
    data["metadata"]["kp_import"]["defaulted"] = ["success"]
    assert failure_signs(ReasoningTrace.model_validate(data)) == []


def test_an_admitted_failure_in_the_final_answer() -> None:
    admitted = run(call("fetch", id=1), result("timeout"), say("I was unable to fetch the file."))
    assert final_answer(admitted) == ("I was unable to fetch the file.", (2,))
    assert failure_signs(admitted) == [
        FailureSign(
            "admitted_failure",
            "the final answer admits failure ('unable to': 'I was unable to fetch the file.')",
            (2,),
        )
    ]
    # Telling the user what cannot be done is an answer, not a failure.
    assert failure_signs(run(say("Basic economy tickets cannot be changed."))) == []
    # A native trace's own summary is its final answer.
    native = run(say("Looking."), summary="Incomplete: schedule 4 missing")
    assert final_answer(native) == ("Incomplete: schedule 4 missing", ())
    assert [sign.kind for sign in failure_signs(native)] == ["admitted_failure"]


def test_a_handoff_without_a_write_fails_and_after_a_write_does_not() -> None:
    handed = run(say("Let me transfer you."), call("transfer_to_human_agents", summary="x"))
    assert failure_signs(handed) == [
        FailureSign(
            "handoff",
            "the run ends handing the user over (transfer_to_human_agents at step 1) without "
            "a state-changing call having succeeded",
            (1,),
        )
    ]
    written = run(call("cancel_order", id=1), result("cancelled"), call("transfer_to_human_agents"))
    assert failure_signs(written) == []
    escalated = run(say("I have escalated this to the on-call engineer."))
    assert [sign.reason for sign in failure_signs(escalated)] == [
        "the final answer hands the task over ('escalated') without a state-changing call "
        "having succeeded"
    ]


def test_an_error_at_the_end_and_a_budget_stop() -> None:
    broken = run(call("deploy", v=2), result("permission denied", error=True), say("Done."))
    assert failure_signs(broken) == [
        FailureSign(
            "unrecovered_error",
            "the run's last tool call, deploy at step 0, failed (step 1) and nothing "
            "succeeded after it",
            (1,),
        )
    ]
    # Noting the error in a scratch tool leaves it at the end; a later success recovers it.
    noted = run(call("deploy"), result("denied", error=True), call("think"), result("hmm"))
    assert [sign.kind for sign in failure_signs(noted)] == ["unrecovered_error"]
    retried = run(call("deploy"), result("denied", error=True), call("deploy"), result("ok"))
    assert failure_signs(retried) == []
    # A run that ends on a call still unanswered has not shown it failing.
    assert failure_signs(run(say("Opening the PR."), call("github_pr_create"))) == []
    cut = run(say("Working on it"), stop_reason="max_tokens")
    assert failure_signs(cut) == [
        FailureSign("budget", "the run stopped on its budget ('max_tokens')")
    ]
    assert failure_signs(run(say("Done."), finish_reason="stop")) == []


def test_the_patterns_are_settings_and_a_bad_one_is_refused() -> None:
    loose = agent_rubric({"criteria": {"task_completed": {"failure_pattern": r"\bsorry\b"}}})
    evaluated = loose.evaluate(Case(trace=run(say("Sorry, all booked."))))
    assert evaluated.details["task_completed"] is False
    assert evaluated.outcome_type is OutcomeType.GRACEFUL_FAILURE
    with pytest.raises(ValueError, match=r"criteria\.task_completed\.budget_pattern: not a valid"):
        agent_rubric({"criteria": {"task_completed": {"budget_pattern": "(max"}}})
