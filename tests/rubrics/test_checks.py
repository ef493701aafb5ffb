"""Ready checks over reasoning traces."""

from __future__ import annotations

from typing import Any

import pytest

from knowledgepulse import ReasoningTrace
from knowledgepulse.rubrics import Case, Criterion, Rubric, checks

from .conftest import build_trace

SUPPORT_STEPS = (
    ("thought", None),
    ("tool_call", "lookup_order"),
    ("observation", None),
    ("tool_call", "crm_note"),
    ("tool_call", "issue_refund"),
    ("observation", None),
)


def case_of(trace: ReasoningTrace | None) -> Case:
    return Case(trace=trace)


SUPPORT = case_of(build_trace(SUPPORT_STEPS, summary="Refund of 42 EUR issued", confidence=0.8))


@pytest.mark.parametrize(
    ("check", "ok"),
    [
        (checks.tool_used("lookup_order"), True),
        (checks.tool_used("issue_refund"), True),
        (checks.tool_used("escalate"), False),
        (checks.tool_not_used("escalate"), True),
        (checks.tool_not_used("crm_note"), False),
        (checks.tools_in_order(["lookup_order", "issue_refund"]), True),
        (checks.tools_in_order(["lookup_order", "crm_note", "issue_refund"]), True),
        (checks.tools_in_order(["issue_refund", "lookup_order"]), False),
        (checks.tools_in_order(["lookup_order", "lookup_order"]), False),
        (checks.tools_in_order(["crm_note"]), True),
        (checks.tools_in_order("crm_note"), True),  # a lone string is one tool name
        (checks.no_error_steps(), True),
        (checks.recovered_from_error(), False),
        (checks.confidence_at_least(0.8), True),
        (checks.confidence_at_least(0.8 + 5e-10), True),  # 1e-9 slack
        (checks.confidence_at_least(0.81), False),
        (checks.confidence_at_least(0.0), True),
        (checks.summary_mentions("refund"), True),
        (checks.summary_mentions("REFUND OF"), True),
        (checks.summary_mentions("REFUND", case_sensitive=True), False),
        (checks.summary_mentions("Refund", case_sensitive=True), True),
        (checks.summary_mentions("escalat"), False),
        (checks.succeeded(), True),
        (checks.max_steps(6), True),
        (checks.max_steps(5), False),
    ],
    ids=lambda value: getattr(value, "__name__", str(value)),
)
def test_checks_on_a_support_trace(check: checks.TraceCheck, ok: bool) -> None:
    assert check(SUPPORT) is ok


def test_error_recovery_checks() -> None:
    steps = (
        ("tool_call", "api"),
        ("error_recovery", None),
        ("tool_call", "api"),
        ("error_recovery", None),
    )
    case = case_of(build_trace(steps, success=False))
    assert checks.recovered_from_error()(case) is True
    assert checks.recovered_from_error(at_least=2)(case) is True
    assert checks.recovered_from_error(at_least=3)(case) is False
    assert checks.no_error_steps()(case) is False
    assert checks.succeeded()(case) is False
    assert checks.tools_in_order(["api", "api"])(case) is True


def test_tool_checks_see_tools_on_any_step_type() -> None:
    case = case_of(build_trace((("observation", "browser"), ("thought", None))))
    assert checks.tool_used("browser")(case) is True


def test_names_and_descriptions_are_readable() -> None:
    check = checks.tools_in_order(["search", "cite"])
    assert check.__name__ == "tools_in_order(['search', 'cite'])"
    assert check.description == "the agent used the tools 'search' then 'cite'"
    assert repr(check) == f"<check {check.__name__}: {check.description}>"
    assert checks.tool_used("kb").__name__ == "tool_used('kb')"
    assert checks.recovered_from_error().__name__ == "recovered_from_error"
    assert checks.recovered_from_error(2).description == (
        "the trace has at least 2 error_recovery steps"
    )
    assert checks.confidence_at_least(0.75).description == "the outcome confidence is at least 0.75"
    criterion = Criterion("searched", 1.0, checks.tool_used("search"))
    assert criterion.description == "the agent used the tool 'search'"


@pytest.mark.parametrize(
    ("factory", "args", "message"),
    [
        (checks.tools_in_order, ([],), "at least one tool name"),
        (checks.recovered_from_error, (0,), "at_least >= 1"),
        (checks.confidence_at_least, (1.5,), r"bound in \[0, 1\]"),
        (checks.confidence_at_least, (-0.1,), r"bound in \[0, 1\]"),
        (checks.summary_mentions, ("",), "non-empty text"),
        (checks.max_steps, (0,), "limit >= 1"),
    ],
)
def test_factories_refuse_bad_arguments(factory: Any, args: tuple[Any, ...], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        factory(*args)


def test_a_case_without_a_trace_raises_and_the_rubric_records_it() -> None:
    check = checks.tool_used("search")
    with pytest.raises(ValueError, match=r"tool_used\('search'\) needs a reasoning trace"):
        check(case_of(None))
    rubric = Rubric(
        "trace_needed",
        [Criterion("searched", 0.5, check), Criterion("other", 0.5, lambda case: True)],
    )
    result = rubric.evaluate(Case(case_id="no-trace"))
    assert result.details == {"searched": False, "other": True}
    assert result.errors == {
        "searched": "ValueError: tool_used('search') needs a reasoning trace, but the case has none"
    }
    assert result.score == 0.5


def test_trace_check_decorator() -> None:
    @checks.trace_check("the agent took at least three steps")
    def long_enough(trace: ReasoningTrace) -> bool:
        return len(trace.steps) >= 3

    assert long_enough.__name__ == "long_enough"
    assert long_enough(SUPPORT) is True
    rubric = Rubric("r", [Criterion("long", 1.0, long_enough)])
    assert rubric.criteria[0].description == "the agent took at least three steps"

    @checks.trace_check("named", name="custom")
    def other(trace: ReasoningTrace) -> bool:
        return True

    assert other.__name__ == "custom"


def test_a_rubric_of_ready_checks_grades_a_trace() -> None:
    rubric = Rubric(
        "support",
        [
            Criterion("order_first", 0.4, checks.tools_in_order(["lookup_order", "issue_refund"])),
            Criterion("no_escalation", 0.2, checks.tool_not_used("escalate")),
            Criterion("clean", 0.1, checks.no_error_steps()),
            Criterion("confident", 0.1, checks.confidence_at_least(0.9)),
            Criterion("says_refund", 0.2, checks.summary_mentions("refund")),
        ],
        success_gate=checks.succeeded(),
    )
    result = rubric.evaluate(SUPPORT)
    assert result.failed == ["confident"]
    assert result.score == 0.9
    assert result.outcome_type is not None
    assert result.outcome_type.value == "successful_completion"
    assert rubric.gate_description == "the trace reports success"
