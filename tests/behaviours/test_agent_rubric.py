"""The agent rubric: undetermined criteria, the gate, composing criteria, and its settings."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from behaviours._traces import call, result, say, trace, user
from knowledgepulse.behaviours import (
    AGENT_RUBRIC,
    BEHAVIOURS,
    RubricSettingsError,
    agent_rubric,
    behaviour_criterion,
    load_agent_rubric,
)
from knowledgepulse.rubrics import (
    Case,
    FrozenRubricError,
    OutcomeAgreement,
    OutcomeType,
    Rubric,
    resolve_rubric,
)

BOOKING = {"task": {"actions": [{"name": "book", "kwargs": {"flight": "HAT1"}}]}}


def conversation(flight: str = "HAT1") -> Case:
    made = trace(
        say("Book HAT1 for you?"),
        user("Yes please."),
        call("book", flight=flight),
        result("booked"),
        say("Booked."),
        ground_truth=BOOKING,
    )
    return Case(trace=made, case_id=made.id)


def test_the_defaults_weigh_one_and_are_documented() -> None:
    assert math.isclose(sum(b.weight for b in BEHAVIOURS.values()), 1.0)
    assert AGENT_RUBRIC.weights == {name: b.weight for name, b in BEHAVIOURS.items()}
    assert list(AGENT_RUBRIC.weights) == [
        "expected_actions",
        "task_completed",
        "no_loops",
        "errors_recovered",
        "known_tools",
        "valid_arguments",
        "confirmed_before_write",
        "answered",
        "within_budget",
        "identified_before_write",
        "grounded_answer",
        "grounded_arguments",
        "grounded_statements",
        "no_failed_calls",
        "made_progress",
        "expected_answer",
    ]
    assert {name: b.locates for name, b in BEHAVIOURS.items() if b.locates != "cause"} == {
        "expected_actions": "outcome",
        "task_completed": "symptom",
        "answered": "symptom",
        "within_budget": "symptom",
        "grounded_answer": "symptom",
        "grounded_statements": "evidence",
        "expected_answer": "symptom",
    }
    for behaviour in BEHAVIOURS.values():
        assert behaviour.why and behaviour.description
        assert all(parameter.why for parameter in behaviour.parameters)
    assert resolve_rubric("agent") is AGENT_RUBRIC
    with pytest.raises(FrozenRubricError):
        AGENT_RUBRIC.add(behaviour_criterion("answered"))


def test_a_good_conversation_succeeds_and_missing_facts_are_undetermined() -> None:
    evaluated = AGENT_RUBRIC.evaluate(conversation())
    assert evaluated.details == {
        "expected_actions": True,
        "task_completed": None,
        "no_loops": True,
        "errors_recovered": True,
        "known_tools": None,
        "valid_arguments": None,
        "confirmed_before_write": True,
        "answered": True,
        "within_budget": True,
        "identified_before_write": None,
        "grounded_answer": None,
        "grounded_arguments": None,
        "grounded_statements": True,
        "no_failed_calls": True,
        "made_progress": True,
        "expected_answer": None,
    }
    assert evaluated.undetermined == {
        "task_completed": "the task's expected actions decide the outcome (expected_actions), "
        "and the run got to its end",
        "known_tools": "the trace declares no tools",
        "valid_arguments": "the trace declares no tools",
        "identified_before_write": "the run neither calls nor declares a tool that identifies "
        "the user",
        "grounded_answer": "the final answer states no number or id",
        "grounded_arguments": "the state-changing calls pass no id, e-mail or number to check",
        "expected_answer": "the trace has no expected answer in metadata.ground_truth.answer",
    }
    assert evaluated.score == 1.0
    assert evaluated.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
    assert evaluated.errors == {}
    assert evaluated.verdicts["expected_actions"].reasoning == (
        "the 1 expected state-changing calls were made (step 2)"
    )


def test_a_wrong_action_fails_the_gate_and_is_explained() -> None:
    evaluated = AGENT_RUBRIC.evaluate(conversation(flight="HAT2"))
    assert evaluated.details["expected_actions"] is False
    assert evaluated.gate_passed is False
    assert math.isclose(evaluated.score, 0.4 / 0.8, abs_tol=1e-9)  # over the determined 0.8
    assert evaluated.outcome_type is OutcomeType.GRACEFUL_FAILURE
    assert evaluated.explanation.endswith(
        "Checked expected_actions: no: step 2 book differs from the expected call in flight"
    )
    # Weighted low, the failed outcome still cannot pass: the gate holds it back.
    light = agent_rubric({"criteria": {"expected_actions": {"weight": 0.05}}, "normalise": True})
    lightly = light.evaluate(conversation(flight="HAT2"))
    assert math.isclose(lightly.score, 0.40 / 0.45, abs_tol=1e-9)
    assert lightly.outcome_type is OutcomeType.GRACEFUL_FAILURE
    ungated = agent_rubric(
        {"criteria": {"expected_actions": {"weight": 0.05}}, "normalise": True, "gate": False}
    )
    assert ungated.evaluate(conversation(flight="HAT2")).outcome_type is (
        OutcomeType.SUCCESSFUL_COMPLETION
    )


def test_a_trace_without_tools_ground_truth_or_user_turns_leaves_their_criteria_undetermined() -> (
    None
):
    evaluated = AGENT_RUBRIC.evaluate(Case(trace=trace(say("The answer is 42."))))
    assert evaluated.undetermined == {
        "expected_actions": "the trace has no expected actions in metadata.ground_truth",
        "no_loops": "the trace has no tool calls",
        "errors_recovered": "the trace has no tool calls",
        "known_tools": "the trace declares no tools",
        "valid_arguments": "the trace declares no tools",
        "confirmed_before_write": "the trace has no user turns after the task",
        "identified_before_write": "the trace has no state-changing call",
        "grounded_arguments": "the trace has no state-changing call",
        "no_failed_calls": "the trace has no tool output",
        "expected_answer": "the trace has no expected answer in metadata.ground_truth.answer",
    }
    assert evaluated.failed == [] and evaluated.errors == {}
    # 42 is in the objective ("Review PR #42 ..."): the answer's number was given.
    assert evaluated.passed == [
        "task_completed",
        "answered",
        "within_budget",
        "grounded_answer",
        "grounded_statements",
        "made_progress",
    ]
    assert evaluated.score == 1.0 and evaluated.gate_passed is True


def test_a_case_without_a_trace_is_undetermined_everywhere() -> None:
    evaluated = AGENT_RUBRIC.evaluate(Case(case_id="bare"))
    assert set(evaluated.details.values()) == {None}
    assert set(evaluated.undetermined.values()) == {"the case has no reasoning trace"}
    assert evaluated.outcome_type is None and evaluated.errors == {}


def test_criteria_compose_into_a_rubric_of_ones_own() -> None:
    mine = Rubric(
        "mine",
        [
            behaviour_criterion("no_loops", 0.5, max_repeats=2),
            behaviour_criterion("answered", 0.5),
        ],
    )
    twice = trace(call("a"), result(), call("a"), result(), say("done"))
    evaluated = mine.evaluate(Case(trace=twice))
    assert evaluated.details == {"no_loops": False, "answered": True}
    assert mine.criteria[0].description.startswith("No tool called with identical arguments")
    with pytest.raises(
        RubricSettingsError, match=r"no_loops\.max_repeats: expected a whole number >= 2, got 1"
    ):
        behaviour_criterion("no_loops", max_repeats=1)
    with pytest.raises(
        RubricSettingsError, match="unknown behaviour 'no_loop'; did you mean 'no_loops'"
    ):
        behaviour_criterion("no_loop")


def test_outcome_agreement_counts_the_confusion_matrix() -> None:
    agreement = OutcomeAgreement()
    for case in (conversation(), conversation(flight="HAT2")):
        agreement.add(case, AGENT_RUBRIC.evaluate(case))
    # make_trace says success for both: the wrong booking is a disagreement.
    assert (agreement.both, agreement.rubric_only, agreement.source_only, agreement.neither) == (
        1,
        0,
        1,
        0,
    )
    assert agreement.agreement == 0.5
    defaulted = trace(say("hi"))
    defaulted.metadata.model_extra["kp_import"]["defaulted"] = ["success"]  # type: ignore[index]
    agreement.add(Case(trace=defaulted), AGENT_RUBRIC.evaluate(Case(trace=defaulted)))
    assert agreement.count == 2


# -- settings ---------------------------------------------------------------------------------


def test_settings_change_weights_parameters_and_thresholds(tmp_path: Path) -> None:
    path = tmp_path / "agent.toml"
    path.write_text(
        'rubric = "agent"\nname = "airline"\n'
        "[thresholds]\nsuccess = 0.9\n"
        "[criteria.within_budget]\nmax_steps = 2\nweight = 0.10\n"
        "[criteria.answered]\nweight = 0.0\n",
        encoding="utf-8",
    )
    rubric = load_agent_rubric(path)
    assert rubric.name == "airline" and rubric.thresholds.success == 0.9
    assert rubric.weights["within_budget"] == 0.10 and rubric.weights["answered"] == 0.0
    evaluated = rubric.evaluate(conversation())
    assert evaluated.details["within_budget"] is False
    assert evaluated.verdicts["within_budget"].reasoning == (
        "3 agent steps, over the budget of 2 from step 4"
    )
    assert resolve_rubric(str(path)).weights == rubric.weights


def test_settings_files_in_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "criteria:\n  no_loops:\n    max_repeats: 5\n", encoding="utf-8"
    )
    (tmp_path / "a.json").write_text(
        json.dumps({"criteria": {"confirmed_before_write": {"write_tools": ["book"]}}}),
        encoding="utf-8",
    )
    assert load_agent_rubric(tmp_path / "a.yaml").weights == AGENT_RUBRIC.weights
    assert load_agent_rubric(tmp_path / "a.json").evaluate(conversation()).score == 1.0


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"criteria": {"within_budget": {"max_steps": "ten"}}},
            "criteria.within_budget.max_steps: expected a whole number >= 1, got 'ten'",
        ),
        (
            {"criteria": {"within_budget": {"max_steps": True}}},
            "criteria.within_budget.max_steps: expected a whole number >= 1, got True",
        ),
        (
            {"criteria": {"no_loop": {"weight": 0.1}}},
            "criteria.no_loop: unknown criterion; did you mean 'no_loops'?",
        ),
        (
            {"criteria": {"no_loops": {"max_repeat": 4}}},
            "criteria.no_loops.max_repeat: unknown parameter of 'no_loops'; did you mean "
            "'max_repeats'?",
        ),
        (
            {"criteria": {"answered": {"weight": "high"}}},
            "criteria.answered.weight: expected a number >= 0, got 'high'",
        ),
        (
            {"criteria": {"expected_actions": {"read_only_tools": "get_*"}}},
            "criteria.expected_actions.read_only_tools: expected a list of names or fnmatch "
            "patterns, got 'get_*'",
        ),
        (
            {"criteria": {"confirmed_before_write": {"payment_arguments": 3}}},
            "criteria.confirmed_before_write.payment_arguments: expected a list of names or "
            "fnmatch patterns, got 3",
        ),
        (
            {"criteria": {"confirmed_before_write": {"consent_pattern": "(yes"}}},
            "criteria.confirmed_before_write.consent_pattern: not a valid regular expression",
        ),
        (
            {"criteria": {"answered": {"weight": 0.5}}},
            "rubric 'agent': weights sum to 1.45",
        ),
        ({"rubric": "scheduling"}, "rubric: only 'agent' can be configured, got 'scheduling'"),
        ({"thresholds": {"success": "x"}}, "thresholds.success: expected a number, got 'x'"),
        ({"gate": "yes"}, "gate: expected true or false, got 'yes'"),
        ({"weights": {}}, "weights: unknown setting"),
    ],
)
def test_wrong_settings_are_refused_naming_the_setting(settings: object, message: str) -> None:
    with pytest.raises(RubricSettingsError) as caught:
        agent_rubric(settings, where="agent.toml")  # type: ignore[arg-type]
    assert str(caught.value).startswith("agent.toml: ")
    assert message in str(caught.value)


def test_an_unreadable_settings_file_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("criteria = [", encoding="utf-8")
    with pytest.raises(RubricSettingsError, match=r"broken\.toml: cannot parse"):
        load_agent_rubric(broken)
    with pytest.raises(RubricSettingsError, match="cannot read the rubric file"):
        load_agent_rubric(tmp_path / "missing.toml")
