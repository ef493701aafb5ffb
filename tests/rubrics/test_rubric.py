"""Rubric definition, weight validation, scoring, classification and explanations."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from knowledgepulse import TraceValidationError
from knowledgepulse.rubrics import (
    TOLERANCE,
    Case,
    Criterion,
    EvaluationResult,
    OutcomeType,
    Rubric,
    Thresholds,
)


def yes(case: Case) -> bool:
    return True


def no(case: Case) -> bool:
    return False


def flag(name: str) -> Any:
    """A check that reads ``final_state[name]``."""

    def check(case: Case) -> bool:
        return bool(case.final_state.get(name))

    check.__name__ = name
    return check


def four_quarters(**kwargs: Any) -> Rubric:
    return Rubric("quarters", [Criterion(n, 0.25, flag(n)) for n in "abcd"], **kwargs)


def passing(*names: str) -> Case:
    return Case(final_state=dict.fromkeys(names, True))


# -- OutcomeType ---------------------------------------------------------------------------


def test_outcome_type_values() -> None:
    assert OutcomeType.SUCCESSFUL_COMPLETION.value == "successful_completion"
    assert OutcomeType.GRACEFUL_FAILURE.value == "graceful_failure"
    assert OutcomeType.PARTIAL_FAILURE.value == "partial_failure"
    assert OutcomeType.HARD_FAILURE.value == "hard_failure"
    assert OutcomeType.HARD_FAILURE == "hard_failure"  # type: ignore[comparison-overlap]
    assert str(OutcomeType.GRACEFUL_FAILURE) == "graceful_failure"
    assert json.dumps(OutcomeType.PARTIAL_FAILURE) == '"partial_failure"'
    assert [o.value for o in OutcomeType] == [
        "successful_completion",
        "graceful_failure",
        "partial_failure",
        "hard_failure",
    ]


# -- Criterion -----------------------------------------------------------------------------


@pytest.mark.parametrize("weight", [-0.1, math.nan, math.inf])
def test_criterion_refuses_bad_weights(weight: float) -> None:
    with pytest.raises(ValueError, match="weight must be a finite number >= 0"):
        Criterion("x", weight, yes)


def test_criterion_refuses_non_numbers_empty_names_and_non_callables() -> None:
    with pytest.raises(TypeError, match="weight must be a number"):
        Criterion("x", True, yes)
    with pytest.raises(TypeError, match="weight must be a number"):
        Criterion("x", "0.5", yes)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty name"):
        Criterion("  ", 0.5, yes)
    with pytest.raises(TypeError, match="check must be callable"):
        Criterion("x", 0.5, "yes")  # type: ignore[arg-type]


def test_criterion_description_comes_from_the_check_docstring() -> None:
    def on_time(case: Case) -> bool:
        """The reply came within an hour.

        More detail that is not part of the description.
        """
        return True

    assert Criterion("on_time", 1.0, on_time).description == "The reply came within an hour."
    assert Criterion("on_time", 1.0, on_time, "explicit").description == "explicit"
    assert Criterion("x", 1.0, yes).description == ""


# -- weights -------------------------------------------------------------------------------


def test_weights_that_do_not_sum_to_one_are_refused_with_the_sum_and_each_weight() -> None:
    with pytest.raises(ValueError) as error:
        Rubric("r", [Criterion("a", 0.5, yes), Criterion("b", 0.4, no)])
    message = str(error.value)
    assert "weights sum to 0.9" in message
    assert "a=0.5" in message and "b=0.4" in message
    assert "normalise=True" in message


@pytest.mark.parametrize("slack", [0.0, 5e-10, -5e-10, 1e-9 * 0.99])
def test_weight_sum_within_tolerance_is_accepted(slack: float) -> None:
    rubric = Rubric("r", [Criterion("a", 0.5, yes), Criterion("b", 0.5 + slack, no)])
    assert rubric.weights["b"] == 0.5 + slack


@pytest.mark.parametrize("slack", [2e-9, -2e-9, 1e-6])
def test_weight_sum_outside_tolerance_is_refused(slack: float) -> None:
    with pytest.raises(ValueError, match=r"not 1\.0"):
        Rubric("r", [Criterion("a", 0.5, yes), Criterion("b", 0.5 + slack, no)])


def test_float_noise_in_the_weights_is_tolerated() -> None:
    rubric = Rubric("tenths", [Criterion(f"c{i}", 0.1, yes) for i in range(10)])
    assert rubric.evaluate(Case()).score == 1.0


def test_normalise_scales_the_weights() -> None:
    rubric = Rubric(
        "scaled",
        [Criterion("a", 2, flag("a")), Criterion("b", 1, flag("b")), Criterion("c", 1, no)],
        normalise=True,
    )
    assert rubric.weights == {"a": 0.5, "b": 0.25, "c": 0.25}
    assert rubric.evaluate(passing("a", "b")).score == 0.75
    assert [c.weight for c in rubric.criteria] == [0.5, 0.25, 0.25]


def test_normalise_refuses_an_all_zero_rubric() -> None:
    with pytest.raises(ValueError, match="cannot normalise"):
        Rubric("zero", [Criterion("a", 0, yes)], normalise=True)


def test_empty_rubric_and_duplicate_names_are_refused() -> None:
    with pytest.raises(ValueError, match="has no criteria"):
        Rubric("empty", [])
    with pytest.raises(ValueError, match="has no criteria"):
        Rubric("lazy").evaluate(Case())
    with pytest.raises(ValueError, match="duplicate criterion name 'a'"):
        Rubric("dup", [Criterion("a", 0.5, yes), Criterion("a", 0.5, no)])
    rubric = Rubric("dup")
    rubric.criterion(weight=0.5)(yes)
    with pytest.raises(ValueError, match="duplicate criterion name 'yes'"):
        rubric.criterion(weight=0.5)(yes)


def test_rubric_needs_a_name_and_criteria_objects() -> None:
    with pytest.raises(ValueError, match="non-empty name"):
        Rubric("")
    with pytest.raises(TypeError, match="expected a Criterion"):
        Rubric("r", [("a", 1.0, yes)])  # type: ignore[list-item]


# -- decorator style -----------------------------------------------------------------------


def test_decorator_style_validates_lazily_and_returns_the_function() -> None:
    rubric = Rubric("deco")

    @rubric.criterion(weight=0.6, description="A holds")
    def a(case: Case) -> bool:
        return bool(case.final_state.get("a"))

    assert a(passing("a")) is True  # still a plain function
    with pytest.raises(ValueError, match=r"weights sum to 0\.6.*a=0\.6"):
        rubric.evaluate(passing("a"))
    with pytest.raises(ValueError, match=r"not 1\.0"):
        rubric.validate()

    @rubric.criterion(weight=0.4, name="b_holds")
    def b(case: Case) -> bool:
        """B holds."""
        return bool(case.final_state.get("b"))

    assert rubric.validate() is rubric
    assert rubric.weights == {"a": 0.6, "b_holds": 0.4}
    assert [c.description for c in rubric] == ["A holds", "B holds."]
    assert len(rubric) == 2
    assert rubric.evaluate(passing("a")).score == 0.6
    assert "Rubric('deco'" in repr(rubric)


def test_adding_a_criterion_after_use_revalidates() -> None:
    rubric = Rubric("grow", [Criterion("a", 1.0, yes)])
    assert rubric.evaluate(Case()).score == 1.0
    rubric.add(Criterion("b", 0.5, yes))
    with pytest.raises(ValueError, match=r"weights sum to 1\.5"):
        rubric.evaluate(Case())


def test_a_lambda_needs_an_explicit_name() -> None:
    rubric = Rubric("lam")
    with pytest.raises(ValueError, match="explicit name"):
        rubric.criterion(weight=1.0)(lambda case: True)
    rubric.criterion(weight=1.0, name="always")(lambda case: True)
    assert rubric.weights == {"always": 1.0}


def test_gate_decorator_bare_and_with_description() -> None:
    rubric = Rubric("gated", [Criterion("a", 1.0, yes)])

    @rubric.gate
    def order_shipped(case: Case) -> bool:
        return bool(case.final_state.get("shipped"))

    assert rubric.success_gate is order_shipped
    assert rubric.gate_description == "order shipped"

    @rubric.gate(description="parcel left the warehouse")
    def shipped(case: Case) -> bool:
        return bool(case.final_state.get("shipped"))

    assert rubric.gate_description == "parcel left the warehouse"
    assert rubric.evaluate(Case(final_state={"shipped": True})).outcome_type is (
        OutcomeType.SUCCESSFUL_COMPLETION
    )
    rubric.set_gate(None)
    assert rubric.success_gate is None
    assert rubric.evaluate(Case()).gate_passed is None


def test_gate_description_defaults_to_the_gate_docstring() -> None:
    def gate(case: Case) -> bool:
        """payment captured"""
        return False

    rubric = Rubric("r", [Criterion("a", 1.0, yes)], success_gate=gate)
    assert rubric.gate_description == "payment captured"
    lam = Rubric("r", [Criterion("a", 1.0, yes)], success_gate=lambda case: False)
    assert lam.gate_description == "custom gate"
    with pytest.raises(TypeError, match="success_gate must be callable"):
        Rubric("r", [Criterion("a", 1.0, yes)], success_gate=1)  # type: ignore[arg-type]


# -- scoring and classification ------------------------------------------------------------


def test_score_is_the_sum_of_passed_weights_without_float_noise() -> None:
    rubric = four_quarters()
    assert rubric.evaluate(passing("a", "b", "c")).score == 0.75
    tenths = Rubric("t", [Criterion(f"c{i}", 0.1, flag(f"c{i}")) for i in range(10)])
    result = tenths.evaluate(passing("c0", "c1", "c2"))
    assert result.score == 0.3  # 0.1 + 0.1 + 0.1 is 0.30000000000000004 in plain floats


@pytest.mark.parametrize(
    ("names", "gate", "score", "outcome"),
    [
        (("a", "b", "c", "d"), True, 1.0, OutcomeType.SUCCESSFUL_COMPLETION),
        (("a", "b", "c", "d"), False, 1.0, OutcomeType.GRACEFUL_FAILURE),
        (("a", "b", "c"), True, 0.75, OutcomeType.SUCCESSFUL_COMPLETION),
        (("a", "b", "c"), False, 0.75, OutcomeType.GRACEFUL_FAILURE),
        (("a", "b"), True, 0.5, OutcomeType.GRACEFUL_FAILURE),
        (("a",), True, 0.25, OutcomeType.PARTIAL_FAILURE),
        ((), True, 0.0, OutcomeType.HARD_FAILURE),
        ((), False, 0.0, OutcomeType.HARD_FAILURE),
    ],
)
def test_outcome_boundaries(
    names: tuple[str, ...], gate: bool, score: float, outcome: OutcomeType
) -> None:
    rubric = four_quarters(success_gate=flag("gate"))
    case = Case(final_state={**dict.fromkeys(names, True), "gate": gate})
    result = rubric.evaluate(case)
    assert result.score == score
    assert result.outcome_type is outcome
    assert result.gate_passed is gate


def test_just_below_one_half_is_a_partial_failure() -> None:
    rubric = Rubric(
        "r", [Criterion("big", 0.49, flag("big")), Criterion("small", 0.51, flag("small"))]
    )
    result = rubric.evaluate(passing("big"))
    assert result.score == 0.49
    assert result.outcome_type is OutcomeType.PARTIAL_FAILURE


@pytest.mark.parametrize(
    ("score", "gate", "outcome"),
    [
        (0.75, True, OutcomeType.SUCCESSFUL_COMPLETION),
        (0.75 - TOLERANCE / 2, True, OutcomeType.SUCCESSFUL_COMPLETION),
        (0.75 - 1e-8, True, OutcomeType.GRACEFUL_FAILURE),
        (0.75, False, OutcomeType.GRACEFUL_FAILURE),
        (0.5, True, OutcomeType.GRACEFUL_FAILURE),
        (0.5 - TOLERANCE / 2, False, OutcomeType.GRACEFUL_FAILURE),
        (0.5 - 1e-8, True, OutcomeType.PARTIAL_FAILURE),
        (1e-6, True, OutcomeType.PARTIAL_FAILURE),
        (TOLERANCE / 2, True, OutcomeType.HARD_FAILURE),
        (0.0, True, OutcomeType.HARD_FAILURE),
    ],
)
def test_classify_uses_the_tolerance(score: float, gate: bool, outcome: OutcomeType) -> None:
    assert four_quarters().classify(score, gate) is outcome


def test_thresholds_are_configurable() -> None:
    strict = four_quarters(thresholds=Thresholds(success=1.0, graceful=0.75))
    assert strict.evaluate(passing("a", "b", "c")).outcome_type is OutcomeType.GRACEFUL_FAILURE
    assert strict.evaluate(passing("a", "b")).outcome_type is OutcomeType.PARTIAL_FAILURE
    assert strict.evaluate(passing(*"abcd")).outcome_type is OutcomeType.SUCCESSFUL_COMPLETION


@pytest.mark.parametrize(("success", "graceful"), [(0.5, 0.75), (0.75, 0.0), (1.5, 0.5)])
def test_thresholds_must_be_ordered(success: float, graceful: float) -> None:
    with pytest.raises(ValueError, match="0 < graceful <= success <= 1"):
        Thresholds(success=success, graceful=graceful)


def test_rubric_without_a_gate_succeeds_on_score_alone() -> None:
    result = four_quarters().evaluate(passing("a", "b", "c"))
    assert result.gate_passed is None
    assert result.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION


# -- failing checks ------------------------------------------------------------------------


def test_a_raising_check_fails_and_is_recorded_and_the_run_goes_on() -> None:
    calls: list[str] = []

    def boom(case: Case) -> bool:
        calls.append("boom")
        raise KeyError("booked_event")

    def after(case: Case) -> bool:
        calls.append("after")
        return True

    rubric = Rubric("r", [Criterion("boom", 0.5, boom), Criterion("after", 0.5, after)])
    result = rubric.evaluate(Case())
    assert calls == ["boom", "after"]
    assert result.details == {"boom": False, "after": True}
    assert result.errors == {"boom": "KeyError: 'booked_event'"}
    assert result.score == 0.5
    assert "Check errors (counted as failed): boom: KeyError: 'booked_event'." in (
        result.explanation
    )


@pytest.mark.parametrize(
    ("value", "shown"), [(1, "int (1)"), ("yes", "str ('yes')"), (None, "NoneType (None)")]
)
def test_a_non_bool_result_fails_with_an_error(value: object, shown: str) -> None:
    def odd(case: Case) -> Any:
        return value

    rubric = Rubric("r", [Criterion("odd", 0.5, odd), Criterion("ok", 0.5, yes)])
    result = rubric.evaluate(Case())
    assert result.details["odd"] is False
    assert result.errors["odd"] == f"check returned {shown}, expected bool"


def test_numpy_bools_count_as_bools() -> None:
    rubric = Rubric("np", [Criterion("a", 1.0, lambda case: np.float64(1.0) > 0.5)])
    result = rubric.evaluate(Case())
    assert result.details == {"a": True}
    assert result.errors == {}
    assert type(result.details["a"]) is bool


def test_a_raising_gate_blocks_success_and_is_reported() -> None:
    def gate(case: Case) -> bool:
        raise RuntimeError("no calendar")

    rubric = Rubric("r", [Criterion("a", 1.0, yes)], success_gate=gate, gate_description="booked")
    result = rubric.evaluate(Case())
    assert result.outcome_type is OutcomeType.GRACEFUL_FAILURE
    assert result.gate_passed is False
    assert result.gate_error == "RuntimeError: no calendar"
    assert result.errors == {}
    assert "The success gate (booked) raised RuntimeError: no calendar, so the outcome is " in (
        result.explanation
    )


# -- explanation ---------------------------------------------------------------------------


def test_explanation_names_passed_and_failed_criteria_with_weights_and_the_gate() -> None:
    rubric = Rubric(
        "sched",
        [
            Criterion("correct_participants", 0.25, flag("p")),
            Criterion("correct_time", 0.25, flag("t")),
            Criterion("correct_duration", 0.10, flag("d")),
            Criterion("explored_alternatives", 0.20, flag("a")),
            Criterion("clear_explanation", 0.20, flag("e")),
        ],
        success_gate=flag("confirmed"),
        gate_description="booking confirmed",
    )
    result = rubric.evaluate(passing("p", "t", "e"))
    assert result.explanation == (
        "Score 0.70 (graceful_failure). Passed: correct_participants (0.25), correct_time (0.25),"
        " clear_explanation (0.20). Failed: correct_duration (0.10), explored_alternatives"
        " (0.20)."
    )
    blocked = rubric.evaluate(passing("p", "t", "d", "a", "e"))
    assert blocked.explanation == (
        "Score 1.00 (graceful_failure). Passed: correct_participants (0.25), correct_time (0.25),"
        " correct_duration (0.10), explored_alternatives (0.20), clear_explanation (0.20)."
        " Failed: none. The success gate (booking confirmed) did not hold, so the outcome is"
        " graceful_failure rather than successful_completion."
    )
    nothing = rubric.evaluate(Case())
    assert nothing.explanation.startswith("Score 0.00 (hard_failure). Passed: none. Failed: ")
    assert "success gate" not in nothing.explanation
    assert blocked.passed == list(rubric.weights)
    assert nothing.failed == list(rubric.weights)


# -- results, cases ------------------------------------------------------------------------


def test_result_is_frozen_and_round_trips_through_json() -> None:
    result = four_quarters(success_gate=flag("gate")).evaluate(
        Case(final_state={"a": True, "b": 1, "gate": False}, case_id="c-1")
    )
    data = json.loads(result.model_dump_json())
    assert data["outcome_type"] == "graceful_failure"
    assert data["details"] == {"a": True, "b": True, "c": False, "d": False}
    assert data["weights"] == {"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}
    assert data["case_id"] == "c-1"
    assert data["rubric"] == "quarters"
    assert EvaluationResult.model_validate_json(result.model_dump_json()) == result
    with pytest.raises(ValueError):
        result.score = 1.0  # type: ignore[misc]


def test_evaluate_accepts_a_json_like_case() -> None:
    result = four_quarters().evaluate({"id": 7, "final_state": {"a": True}})
    assert result.case_id == "7"
    assert result.score == 0.25


def test_case_from_dict_defaults_and_extras(make_trace: Any) -> None:
    case = Case.from_dict({"final_state": None, "note": "hi"}, case_id="3")
    assert case.final_state == {}
    assert case.ground_truth == {}
    assert case.conversation_trace == ()
    assert case.trace is None
    assert case.case_id == "3"
    assert case.metadata == {"note": "hi"}
    trace = make_trace()
    full = Case.from_dict(
        {
            "id": "x",
            "conversation_trace": [{"response": "hi"}],
            "trace": trace.to_dict(),
            "metadata": {"source": "prod"},
        }
    )
    assert full.case_id == "x"
    assert full.trace == trace
    assert full.metadata == {"source": "prod"}
    assert full.conversation_trace == ({"response": "hi"},)


def test_case_from_dict_refuses_wrong_types_and_invalid_traces() -> None:
    with pytest.raises(ValueError, match="final_state must be a JSON object, got list"):
        Case.from_dict({"final_state": []})
    with pytest.raises(ValueError, match="conversation_trace must be a list of turns, got str"):
        Case.from_dict({"conversation_trace": "hello"})
    with pytest.raises(ValueError, match="a case must be a JSON object"):
        Case.from_dict([])  # type: ignore[arg-type]
    with pytest.raises(TraceValidationError, match="steps"):
        Case.from_dict({"trace": {"@type": "ReasoningTrace"}})


def test_custom_case_factory() -> None:
    def factory(data: Any, case_id: str | None) -> Case:
        return Case(final_state=data["state"], case_id=case_id or "none")

    rubric = Rubric("f", [Criterion("a", 1.0, flag("a"))], case_factory=factory)
    result = rubric.evaluate({"state": {"a": True}})
    assert (result.score, result.case_id) == (1.0, "none")


def test_evaluate_each_is_lazy() -> None:
    seen: list[int] = []

    def cases() -> Iterator[Case]:
        for i in range(3):
            seen.append(i)
            yield Case(case_id=str(i))

    results = four_quarters().evaluate_each(cases())
    assert seen == []
    assert next(results).case_id == "0"
    assert seen == [0]


# -- property ------------------------------------------------------------------------------


@given(
    st.lists(st.tuples(st.floats(0.01, 10.0), st.booleans()), min_size=1, max_size=8),
    st.booleans(),
    st.floats(0.05, 1.0),
    st.floats(0.05, 1.0),
)
def test_score_is_the_sum_of_passed_weights_and_the_outcome_follows_thresholds(
    spec: list[tuple[float, bool]], gate: bool, t1: float, t2: float
) -> None:
    graceful, success = sorted((t1, t2))
    criteria = [
        Criterion(f"c{i}", weight, yes if ok else no) for i, (weight, ok) in enumerate(spec)
    ]
    rubric = Rubric(
        "prop",
        criteria,
        normalise=True,
        success_gate=yes if gate else no,
        thresholds=Thresholds(success=success, graceful=graceful),
    )
    result = rubric.evaluate(Case())
    weights = rubric.weights
    assert math.isclose(math.fsum(weights.values()), 1.0, abs_tol=1e-12)
    expected = math.fsum(weights[f"c{i}"] for i, (_, ok) in enumerate(spec) if ok)
    assert result.score == pytest.approx(expected, abs=1e-11)
    assert 0.0 <= result.score <= 1.0
    assert result.details == {f"c{i}": ok for i, (_, ok) in enumerate(spec)}
    score = result.score
    if score >= success - TOLERANCE and gate:
        assert result.outcome_type is OutcomeType.SUCCESSFUL_COMPLETION
    elif score >= graceful - TOLERANCE:
        assert result.outcome_type is OutcomeType.GRACEFUL_FAILURE
    elif score > TOLERANCE:
        assert result.outcome_type is OutcomeType.PARTIAL_FAILURE
    else:
        assert result.outcome_type is OutcomeType.HARD_FAILURE
    if all(ok for _, ok in spec):
        assert score == 1.0


def test_the_first_failing_step_is_the_earliest_a_failed_verdict_names() -> None:
    from knowledgepulse.rubrics import Verdict

    def verdict(passed: bool | None, *steps: int) -> Verdict:
        return Verdict(passed=passed, samples=0, steps=list(steps))

    rubric = Rubric(
        "where",
        [
            Criterion("late", 0.25, lambda case: verdict(False, 9, 4)),
            Criterion("early_pass", 0.25, lambda case: verdict(True, 1)),
            Criterion("tied", 0.25, lambda case: verdict(False, 4)),
            Criterion("whole_run", 0.25, lambda case: verdict(False)),
        ],
    )
    result = rubric.evaluate(Case(case_id="x"))
    # The earliest failed step is 4; "late" names it first in rubric order.
    assert (result.first_failing_step, result.first_failing_criterion) == (4, "late")
    assert result.first_failing_agent is None
    clean = Rubric("clean", [Criterion("ok", 1.0, lambda case: verdict(False))])
    assert clean.evaluate(Case(case_id="y")).first_failing_step is None


def test_a_scored_failure_names_the_first_failing_step_before_a_reported_one() -> None:
    from knowledgepulse.rubrics import Verdict

    def failing(*steps: int) -> Any:
        return lambda case: Verdict(passed=False, samples=0, steps=list(steps))

    rubric = Rubric(
        "mixed", [Criterion("scored", 1.0, failing(7)), Criterion("reported", 0.0, failing(2))]
    )
    result = rubric.evaluate(Case(case_id="x"))
    assert (result.first_failing_step, result.first_failing_criterion) == (7, "scored")
    alone = Rubric(
        "alone",
        [Criterion("scored", 1.0, lambda case: True), Criterion("reported", 0.0, failing(2))],
    )
    assert alone.evaluate(Case(case_id="y")).first_failing_step == 2
