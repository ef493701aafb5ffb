"""Two traces compared, as a result: the parting step, calls only one made, other arguments,
criteria whose verdict flipped, the aligned rows; and its terminal view."""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from .._errors import KnowledgePulseError
from ._render import fit, fit_lines, json_text, verdict_word, wrap_prose

__all__ = [
    "DIFF_SCHEMA",
    "AlignedRow",
    "ArgumentChange",
    "CallRef",
    "ComparisonError",
    "CopyRelation",
    "CriterionFlip",
    "DiffSchema",
    "Direction",
    "FieldChange",
    "PartingStep",
    "Relation",
    "Side",
    "StepRef",
    "TraceComparison",
    "TraceSide",
    "render_traces",
]

DIFF_SCHEMA: Final = "knowledgepulse.diff/1"
#: The ``schema`` field of both kinds of ``kp diff`` answer.
DiffSchema = Literal["knowledgepulse.diff/1"]
#: Which of the two runs compared.
Side = Literal["a", "b"]
#: How a criterion's verdict moved from A to B.
Direction = Literal["regressed", "improved", "changed"]
#: How two traces are copies (the copy decision of kp curate).
CopyRelation = Literal["exact", "near_copy"]

#: How two aligned rows relate. ``same``: the same call (name and arguments) or the same
#: message; ``arguments_differ``: one tool called with other arguments; ``result_differs``:
#: the answers to two aligned calls differ; ``different``: two unmatched steps at one place;
#: ``only_a`` / ``only_b``: a step the other run has nothing for there.
Relation = Literal["same", "arguments_differ", "result_differs", "different", "only_a", "only_b"]


class ComparisonError(KnowledgePulseError, ValueError):
    """Two things that cannot be compared (two rubrics, a file that holds no result, ...)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class StepRef(_Frozen):
    """One step as the comparison shows it: its id, type, tool and a one-line label."""

    step: int = Field(description="The step's step_id.")
    type: str
    tool: str | None = None
    label: str = Field(description="The call with its arguments, or the message's first words.")


class AlignedRow(_Frozen):
    """One row of the side-by-side view: a step of A, a step of B, or both, and how they relate."""

    a: StepRef | None
    b: StepRef | None
    relation: Relation


class PartingStep(_Frozen):
    """The first row where the runs differ: the step of each there (None: that run had ended)."""

    row: int
    step_a: int | None
    step_b: int | None
    relation: Relation
    reason: str


class CallRef(_Frozen):
    """A tool call: its step, tool name and arguments."""

    step: int
    tool: str
    arguments: dict[str, Any]


class FieldChange(_Frozen):
    """One argument that differs between two aligned calls (``path``: dotted, ``[i]`` for items;
    a value is absent on the side that lacks it)."""

    path: str
    a: Any = None
    b: Any = None
    only_in: Side | None = None


class ArgumentChange(_Frozen):
    """Two aligned calls of one tool whose arguments differ, field by field."""

    step_a: int
    step_b: int
    tool: str
    fields: list[FieldChange]


class CriterionFlip(_Frozen):
    """A criterion whose verdict differs between the runs, with each side's reason and steps."""

    name: str
    weight: float
    a: bool | None = Field(description="Its verdict on A (null: undetermined).")
    b: bool | None
    direction: Direction = Field(
        description="regressed: passed on A, failed on B; improved: the other way; changed: "
        "undetermined on one side."
    )
    reason_a: str
    reason_b: str
    steps_a: list[int] = Field(description="The steps of A the verdict is about.")
    steps_b: list[int]


class TraceSide(_Frozen):
    """One of the two traces: id, size, recorded success and, with a rubric, its evaluation."""

    id: str
    steps: int
    tool_calls: int
    success: bool
    score: float | None = None
    outcome: str | None = None


class TraceComparison(_Frozen):
    """Two traces compared (``kp diff A B``). Frozen; ``model_dump_json()`` round-trips through
    ``model_validate_json``; :meth:`render` is the terminal view.

    The runs are aligned by a longest common subsequence of their tool calls (name and
    canonical arguments), then calls of one tool with other arguments, then the messages
    between them; ``rows`` is that alignment, ``parting`` its first row that is not ``same``.
    """

    schema_: DiffSchema = Field(default=DIFF_SCHEMA, alias="schema")
    kind: Literal["traces"] = "traces"
    a: TraceSide
    b: TraceSide
    identical: bool = Field(description="The two are exact copies (the same copy digest).")
    copy_relation: CopyRelation | None = Field(
        description="exact: the same normalised text; near_copy: estimated Jaccard similarity "
        "of the run texts at least the copy threshold; null: neither."
    )
    similarity: float = Field(description="Estimated Jaccard similarity of the run texts.")
    parting: PartingStep | None = Field(description="Null when every row is the same.")
    parting_call: PartingStep | None = Field(
        description="The first row with a tool call that is not the same (messages worded "
        "otherwise are left aside); null when every call is."
    )
    rows: list[AlignedRow]
    same_steps: int = Field(description="Rows whose two steps are the same.")
    only_a_calls: list[CallRef] = Field(description="Calls A made that B did not (unaligned).")
    only_b_calls: list[CallRef]
    argument_changes: list[ArgumentChange]
    rubric: str | None = None
    flipped: list[CriterionFlip] = Field(default_factory=list)
    notes: list[str] = Field(
        default_factory=list, description="What limits the comparison (no tool calls, ...)."
    )
    explanation: str

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    def render(self, width: int = 80) -> str:
        """The terminal view: header, flipped criteria, parting step, calls and the aligned rows,
        each line at most ``width`` characters."""
        return render_traces(self, width)


# -- the terminal view -------------------------------------------------------------------------

#: The mark of each relation in the side-by-side rows.
MARKS = {
    "same": "=",
    "arguments_differ": "~",
    "result_differs": "!",
    "different": "#",
    "only_a": "<",
    "only_b": ">",
}
#: Runs of same rows longer than this are folded to their first and last row.
_FOLD = 3


def _side_lines(name: str, side: TraceSide, width: int) -> list[str]:
    facts = (
        f"{side.steps} steps, {side.tool_calls} calls, success {'yes' if side.success else 'no'}"
    )
    if side.score is not None:
        facts += f", score {side.score:.2f} ({side.outcome or 'undetermined'})"
    return [fit(f"{name} {side.id}", width), fit(f"  {facts}", width)]


def _with_steps(reason: str, steps: list[int]) -> str:
    """The reason, and the steps it is about unless it names them itself."""
    if "step" in reason:
        return reason
    return f"{reason} [{'steps ' + ', '.join(map(str, steps)) if steps else 'no step named'}]"


def _cell(ref: StepRef | None, width: int) -> str:
    if ref is None:
        return " " * width
    return fit(f"{ref.step:>3} {ref.label}", width).ljust(width)


def _row(row: AlignedRow, column: int, parting: bool) -> str:
    lead = ">>" if parting else "  "
    return f"{lead}{MARKS[row.relation]} {_cell(row.a, column)} | {_cell(row.b, column)}".rstrip()


def render_traces(c: TraceComparison, width: int = 80) -> str:
    out = [*_side_lines("A", c.a, width), *_side_lines("B", c.b, width)]
    if c.identical:
        out.append("Identical: the two traces are exact copies (the same copy digest).")
        return "\n".join(fit_lines(out, width))
    relation = f", {c.copy_relation.replace('_', ' ')}" if c.copy_relation else ""
    out.append(f"Similarity of the run texts {c.similarity:.2f}{relation}.")
    out += [f"Note: {note}" for note in c.notes]
    if c.parting is None:
        out.append("No step differs.")
    else:
        p = c.parting
        a = "-" if p.step_a is None else p.step_a
        b = "-" if p.step_b is None else p.step_b
        out.append(f"Parted at step {a} of A, step {b} of B: {p.reason}.")
    if c.parting_call is not None and c.parting_call != c.parting:
        p = c.parting_call
        a = "-" if p.step_a is None else p.step_a
        b = "-" if p.step_b is None else p.step_b
        out.append(f"First call that differs: step {a} of A, step {b} of B: {p.reason}.")
    out += _flip_lines(c) + _call_lines(c)
    column = (width - 7) // 2
    legend = "= same  ~ other arguments  ! other result  # different  < only A  > only B"
    out += ["", fit(legend, width), f"   {'A'.ljust(column)} | B"]
    parting_row = c.parting.row if c.parting else -1
    index = 0
    rows = c.rows
    while index < len(rows):
        end = index
        while end < len(rows) and rows[end].relation == "same" and end != parting_row:
            end += 1
        if end - index > _FOLD:
            out.append(_row(rows[index], column, False))
            out.append(f"   … {end - index - 2} same steps …")
            out.append(_row(rows[end - 1], column, False))
            index = end
            continue
        out.append(_row(rows[index], column, index == parting_row))
        index += 1
    return "\n".join(wrap_prose(out, width))


def _flip_lines(c: TraceComparison) -> list[str]:
    if c.rubric is None:
        return []
    if not c.flipped:
        return [f"No criterion of the {c.rubric} rubric flipped."]
    out = [f"Flipped criteria ({c.rubric} rubric):"]
    for flip in c.flipped:
        verdicts = f"{verdict_word(flip.a)} on A, {verdict_word(flip.b)} on B"
        out.append(f"  {flip.name}: {flip.direction} ({verdicts})")
        out.append(f"    A: {_with_steps(flip.reason_a, flip.steps_a)}")
        out.append(f"    B: {_with_steps(flip.reason_b, flip.steps_b)}")
    return out


def _call_lines(c: TraceComparison) -> list[str]:
    out: list[str] = []
    for name, calls in (("A", c.only_a_calls), ("B", c.only_b_calls)):
        if calls:
            out.append(f"Calls only {name} made ({len(calls)}):")
            out += [
                f"  step {call.step}: {call.tool}({json_text(call.arguments)})" for call in calls
            ]
    if c.argument_changes:
        out.append(f"Same tool, other arguments ({len(c.argument_changes)}):")
        for change in c.argument_changes:
            out.append(f"  step {change.step_a} of A, {change.step_b} of B: {change.tool}")
            for field in change.fields:
                if field.only_in == "a":
                    out.append(f"    {field.path}: {json_text(field.a)} (only A)")
                elif field.only_in == "b":
                    out.append(f"    {field.path}: {json_text(field.b)} (only B)")
                else:
                    out.append(f"    {field.path}: {json_text(field.a)} -> {json_text(field.b)}")
    return out
