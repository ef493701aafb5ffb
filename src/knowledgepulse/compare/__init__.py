"""Compare two runs: where two traces parted and which verdicts flipped; two evaluations case by case.

- :func:`compare_traces` — two :class:`~knowledgepulse.ReasoningTrace` objects aligned by a longest
  common subsequence of their tool calls (name and canonical arguments), then of their
  messages: the first parting step, calls only one made, arguments that differ, whether they
  are copies and, with a rubric, the criteria whose verdict flipped with their steps
  (:class:`TraceComparison`).
- :func:`compare_evaluations` — two ``kp eval`` (or ``kp score``) runs paired by case id or
  task: pass rates per criterion before and after, flipped cases, outcome changes, the score
  delta with a paired t 95 % interval (:class:`EvaluationComparison`).
- :func:`load_results` / :func:`results_kind` — read and recognise result files.
- :func:`trace_from_file` / :func:`trace_from_base` — the trace to compare, from a file in any
  ``--from`` format or a knowledge base.
- :func:`diff_schema` — the JSON Schema of both results (``kp schema diff``).

``kp diff``, ``GET /v1/compare`` and the viewer's compare page all answer with these types.
See ``docs/compare.md``.
"""

from __future__ import annotations

from typing import Any

from ._evaluations import (
    CriterionChange,
    EvaluationComparison,
    OutcomeChange,
    ResultsFile,
    ResultsSide,
    ScoreDelta,
    compare_evaluations,
    load_results,
    paired_t_interval,
    results_kind,
)
from ._reading import trace_from_base, trace_from_file
from ._traces import (
    DIFF_SCHEMA,
    AlignedRow,
    ArgumentChange,
    CallRef,
    ComparisonError,
    CriterionFlip,
    FieldChange,
    PartingStep,
    StepRef,
    TraceComparison,
    TraceSide,
    compare_traces,
)

__all__ = [
    "DIFF_SCHEMA",
    "AlignedRow",
    "ArgumentChange",
    "CallRef",
    "ComparisonError",
    "CriterionChange",
    "CriterionFlip",
    "EvaluationComparison",
    "FieldChange",
    "OutcomeChange",
    "PartingStep",
    "ResultsFile",
    "ResultsSide",
    "ScoreDelta",
    "StepRef",
    "TraceComparison",
    "TraceSide",
    "compare_evaluations",
    "compare_traces",
    "diff_schema",
    "load_results",
    "paired_t_interval",
    "results_kind",
    "trace_from_base",
    "trace_from_file",
]


def diff_schema() -> dict[str, Any]:
    """The JSON Schema of a ``kp diff --json`` document: a trace or an evaluation comparison,
    told apart by ``kind``."""
    from typing import Annotated, Union

    from pydantic import Field, TypeAdapter

    either = Annotated[Union[TraceComparison, EvaluationComparison], Field(discriminator="kind")]  # noqa: UP007
    schema: dict[str, Any] = TypeAdapter(either).json_schema(by_alias=True)
    schema.setdefault("$schema", "https://json-schema.org/draft/2020-12/schema")
    return schema
