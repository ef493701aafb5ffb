"""Ready checks over the :class:`~knowledgepulse.ReasoningTrace` of a case (``case.trace``).

Each factory returns a :class:`TraceCheck`: a callable ``check(case) -> bool`` with a readable
``__name__`` and ``description``, so it can be used directly as a criterion's check::

    Criterion("searched_kb", 0.3, checks.tool_used("kb_search"))

A case without a trace makes every check here raise ``ValueError``; the rubric records that as
the criterion's error (the criterion fails, the run goes on).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._schema import ReasoningTrace
from ._case import Case
from ._criterion import TOLERANCE

__all__ = [
    "TraceCheck",
    "confidence_at_least",
    "max_steps",
    "no_error_steps",
    "recovered_from_error",
    "succeeded",
    "summary_mentions",
    "tool_not_used",
    "tool_used",
    "tools_in_order",
    "trace_check",
]


class TraceCheck:
    """A check on ``case.trace``: ``predicate(trace) -> bool`` with a name and a description."""

    def __init__(
        self, name: str, description: str, predicate: Callable[[ReasoningTrace], bool]
    ) -> None:
        self.__name__ = name
        self.description = description
        self._predicate = predicate

    def __call__(self, case: Case) -> bool:
        """The predicate on the case's trace (ValueError when the case has no trace)."""
        if case.trace is None:
            raise ValueError(f"{self.__name__} needs a reasoning trace, but the case has none")
        return bool(self._predicate(case.trace))

    def __repr__(self) -> str:
        return f"<check {self.__name__}: {self.description}>"


def trace_check(
    description: str, *, name: str | None = None
) -> Callable[[Callable[[ReasoningTrace], bool]], TraceCheck]:
    """Decorator: turn ``predicate(trace) -> bool`` into a :class:`TraceCheck`."""

    def wrap(predicate: Callable[[ReasoningTrace], bool]) -> TraceCheck:
        return TraceCheck(name or predicate.__name__, description, predicate)

    return wrap


def tool_used(name: str) -> TraceCheck:
    """Passes when some step used the tool ``name``."""
    return TraceCheck(
        f"tool_used({name!r})",
        f"the agent used the tool {name!r}",
        lambda trace: name in trace.tool_names,
    )


def tool_not_used(name: str) -> TraceCheck:
    """Passes when no step used the tool ``name``."""
    return TraceCheck(
        f"tool_not_used({name!r})",
        f"the agent did not use the tool {name!r}",
        lambda trace: name not in trace.tool_names,
    )


def tools_in_order(names: Sequence[str]) -> TraceCheck:
    """Passes when the tools ``names`` were used in this order (other tools may come between)."""
    expected = [names] if isinstance(names, str) else list(names)
    if not expected:
        raise ValueError("tools_in_order needs at least one tool name")

    def in_order(trace: ReasoningTrace) -> bool:
        used = iter(trace.tool_names)
        # `in` on an iterator consumes it, which makes this a subsequence test.
        return all(tool in used for tool in expected)

    return TraceCheck(
        f"tools_in_order({expected!r})",
        "the agent used the tools " + " then ".join(repr(tool) for tool in expected),
        in_order,
    )


def no_error_steps() -> TraceCheck:
    """Passes when the trace has no ``error_recovery`` step (nothing went wrong)."""
    return TraceCheck(
        "no_error_steps",
        "the trace has no error_recovery step",
        lambda trace: all(step.type != "error_recovery" for step in trace.steps),
    )


def recovered_from_error(at_least: int = 1) -> TraceCheck:
    """Passes when the trace has at least ``at_least`` ``error_recovery`` steps."""
    if at_least < 1:
        raise ValueError(f"recovered_from_error needs at_least >= 1, got {at_least}")
    plural = "step" if at_least == 1 else "steps"
    return TraceCheck(
        "recovered_from_error" if at_least == 1 else f"recovered_from_error({at_least})",
        f"the trace has at least {at_least} error_recovery {plural}",
        lambda trace: sum(step.type == "error_recovery" for step in trace.steps) >= at_least,
    )


def confidence_at_least(bound: float) -> TraceCheck:
    """Passes when ``outcome.confidence`` ≥ ``bound`` (with 1e-9 slack)."""
    if not 0.0 <= bound <= 1.0:
        raise ValueError(f"confidence_at_least needs a bound in [0, 1], got {bound!r}")
    return TraceCheck(
        f"confidence_at_least({bound!r})",
        f"the outcome confidence is at least {bound:g}",
        lambda trace: trace.outcome.confidence >= bound - TOLERANCE,
    )


def summary_mentions(text: str, *, case_sensitive: bool = False) -> TraceCheck:
    """Passes when ``outcome.result_summary`` contains ``text`` (case-insensitive by default)."""
    if not text:
        raise ValueError("summary_mentions needs a non-empty text")
    needle = text if case_sensitive else text.casefold()

    def mentions(trace: ReasoningTrace) -> bool:
        summary = trace.outcome.result_summary
        return needle in (summary if case_sensitive else summary.casefold())

    return TraceCheck(
        f"summary_mentions({text!r})", f"the result summary mentions {text!r}", mentions
    )


def succeeded() -> TraceCheck:
    """Passes when the trace reports ``metadata.success``."""
    return TraceCheck(
        "succeeded", "the trace reports success", lambda trace: trace.metadata.success
    )


def max_steps(limit: int) -> TraceCheck:
    """Passes when the trace has at most ``limit`` steps."""
    if limit < 1:
        raise ValueError(f"max_steps needs a limit >= 1, got {limit}")
    return TraceCheck(
        f"max_steps({limit})",
        f"the trace has at most {limit} steps",
        lambda trace: len(trace.steps) <= limit,
    )
