"""No valid trace makes a behaviour check raise, whatever its steps, ground truth or tools."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _helpers import make_trace
from knowledgepulse import ReasoningTrace
from knowledgepulse.behaviours import AGENT_RUBRIC, BehaviourCheck, Finding, find_loops
from knowledgepulse.rubrics import Case, Verdict

TOOLS = st.sampled_from(["get_user", "book", "cancel", "think", "Bash", "transfer_to_human"])
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(["name", "kwargs", "arguments", "type", "x"]), inner, max_size=4
        )
    ),
    max_leaves=12,
)
ARGUMENTS = st.dictionaries(st.sampled_from(["id", "amount", "flights", "q"]), JSON, max_size=3)


@st.composite
def steps(draw: st.DrawFn) -> dict[str, Any]:
    step: dict[str, Any] = {
        "type": draw(st.sampled_from(["thought", "tool_call", "observation", "error_recovery"]))
    }
    if draw(st.booleans()):
        step["content"] = draw(st.sampled_from(["", "yes", "No, wait", "Error: x", "ok"]))
    if draw(st.booleans()):
        step["tool"] = {"name": draw(TOOLS)}
    if draw(st.booleans()):
        step["input"] = draw(ARGUMENTS)
    if draw(st.booleans()):
        step["is_error"] = draw(st.one_of(st.booleans(), JSON))
    if draw(st.booleans()):
        step["source"] = draw(st.sampled_from(["user", "agent", None]))
    return step


def _actions() -> st.SearchStrategy[Any]:
    action = st.fixed_dictionaries(
        {"name": TOOLS}, optional={"kwargs": ARGUMENTS | JSON, "arguments": JSON, "requestor": JSON}
    )
    return st.lists(action, max_size=3) | JSON


def _definitions() -> st.SearchStrategy[Any]:
    schema = st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "string", "integer", ["object", "null"], 3]),
            "required": st.lists(st.sampled_from(["id", "q", 4]), max_size=2) | JSON,
            "properties": st.dictionaries(st.sampled_from(["id", "q"]), JSON, max_size=2),
            "additionalProperties": st.booleans() | JSON,
            "anyOf": st.lists(JSON, max_size=2),
            "enum": JSON,
            "items": JSON,
        },
    )
    definition = st.one_of(
        st.fixed_dictionaries({"name": TOOLS}, optional={"parameters": schema | JSON}),
        st.fixed_dictionaries(
            {
                "type": st.just("function"),
                "function": st.fixed_dictionaries({"name": TOOLS}, optional={"parameters": schema}),
            }
        ),
        JSON,
    )
    return st.lists(definition, max_size=4) | JSON


@st.composite
def traces(draw: st.DrawFn) -> ReasoningTrace:
    data = make_trace(draw(st.lists(steps(), min_size=1, max_size=14)))
    data["outcome"]["result_summary"] = draw(st.sampled_from(["", "ok", "yes"]))
    metadata = data["metadata"]
    if draw(st.booleans()):
        metadata["ground_truth"] = draw(
            st.one_of(
                JSON,
                st.fixed_dictionaries({"actions": _actions()}),
                st.fixed_dictionaries({"task": st.fixed_dictionaries({"actions": _actions()})}),
            )
        )
    if draw(st.booleans()):
        metadata["kp_import"] = {"tool_definitions": draw(_definitions())}
    if draw(st.booleans()):
        metadata["tools"] = draw(_definitions())
    return ReasoningTrace.model_validate(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(traces())
def test_no_trace_makes_a_criterion_raise(trace: ReasoningTrace) -> None:
    case = Case(trace=trace)
    for criterion in AGENT_RUBRIC.criteria:
        assert isinstance(criterion.check, BehaviourCheck)
        finding = criterion.check.find(trace)  # raising here fails the test
        assert isinstance(finding, Finding) and finding.reason
        assert isinstance(criterion.check(case), Verdict)
    evaluated = AGENT_RUBRIC.evaluate(case)
    assert evaluated.errors == {} and evaluated.gate_error is None
    find_loops(trace, max_repeats=2, longest_cycle=4, cycle_repeats=2)
