"""The terminal views of comparisons: plain text, every line within the given width."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._evaluations import EvaluationComparison
    from ._traces import AlignedRow, StepRef, TraceComparison, TraceSide

__all__ = ["render_evaluations", "render_traces"]

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


def _fit(text: str, width: int) -> str:
    indent = text[: len(text) - len(text.lstrip(" "))]
    flat = indent + " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(0, width - 1)] + "…"


def _lines(items: Iterable[str], width: int) -> list[str]:
    return [_fit(item, width) if len(item) > width else item for item in items]


def _side(name: str, side: TraceSide, width: int) -> list[str]:
    facts = (
        f"{side.steps} steps, {side.tool_calls} calls, success {'yes' if side.success else 'no'}"
    )
    if side.score is not None:
        facts += f", score {side.score:.2f} ({side.outcome or 'undetermined'})"
    return [_fit(f"{name} {side.id}", width), _fit(f"  {facts}", width)]


def _value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _with_steps(reason: str, steps: list[int]) -> str:
    """The reason, and the steps it is about unless it names them itself."""
    if "step" in reason:
        return reason
    return f"{reason} [{'steps ' + ', '.join(map(str, steps)) if steps else 'no step named'}]"


def _cell(ref: StepRef | None, width: int) -> str:
    if ref is None:
        return " " * width
    return _fit(f"{ref.step:>3} {ref.label}", width).ljust(width)


def _row(row: AlignedRow, column: int, parting: bool) -> str:
    lead = ">>" if parting else "  "
    return f"{lead}{MARKS[row.relation]} {_cell(row.a, column)} | {_cell(row.b, column)}".rstrip()


def render_traces(c: TraceComparison, width: int = 80) -> str:
    out = [*_side("A", c.a, width), *_side("B", c.b, width)]
    if c.identical:
        out.append("Identical: the two traces are exact copies (the same copy digest).")
        return "\n".join(_lines(out, width))
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
    out += ["", _fit(legend, width), f"   {'A'.ljust(column)} | B"]
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
    return "\n".join(_wrap(out, width))


def _flip_lines(c: TraceComparison) -> list[str]:
    if c.rubric is None:
        return []
    if not c.flipped:
        return [f"No criterion of the {c.rubric} rubric flipped."]
    out = [f"Flipped criteria ({c.rubric} rubric):"]
    for flip in c.flipped:
        verdicts = f"{_verdict(flip.a)} on A, {_verdict(flip.b)} on B"
        out.append(f"  {flip.name}: {flip.direction} ({verdicts})")
        out.append(f"    A: {_with_steps(flip.reason_a, flip.steps_a)}")
        out.append(f"    B: {_with_steps(flip.reason_b, flip.steps_b)}")
    return out


def _call_lines(c: TraceComparison) -> list[str]:
    out: list[str] = []
    for name, calls in (("A", c.only_a_calls), ("B", c.only_b_calls)):
        if calls:
            out.append(f"Calls only {name} made ({len(calls)}):")
            out += [f"  step {call.step}: {call.tool}({_value(call.arguments)})" for call in calls]
    if c.argument_changes:
        out.append(f"Same tool, other arguments ({len(c.argument_changes)}):")
        for change in c.argument_changes:
            out.append(f"  step {change.step_a} of A, {change.step_b} of B: {change.tool}")
            for field in change.fields:
                if field.only_in == "a":
                    out.append(f"    {field.path}: {_value(field.a)} (only A)")
                elif field.only_in == "b":
                    out.append(f"    {field.path}: {_value(field.b)} (only B)")
                else:
                    out.append(f"    {field.path}: {_value(field.a)} -> {_value(field.b)}")
    return out


def _verdict(value: bool | None) -> str:
    return "passed" if value else "failed" if value is False else "undetermined"


def _wrap(lines: Iterable[str], width: int) -> list[str]:
    """Long prose lines wrapped, indented as they were; the rows are already cut to fit."""
    import textwrap

    wrapped: list[str] = []
    for line in lines:
        if len(line) <= width:
            wrapped.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        wrapped += textwrap.wrap(
            line, width, subsequent_indent=indent, break_long_words=True, break_on_hyphens=False
        )
    return wrapped


def _rate(value: float | None) -> str:
    return "     -" if value is None else f"{value:6.1%}"


def render_evaluations(c: EvaluationComparison, width: int = 80) -> str:
    out = [
        _fit(f"A {c.a.name}: {c.a.cases} {c.record_kind} lines", width),
        _fit(f"B {c.b.name}: {c.b.cases} {c.record_kind} lines", width),
        f"Paired by {c.by}: {c.paired} pairs; only in A: {len(c.only_a)}, "
        f"only in B: {len(c.only_b)}.",
    ]
    if c.rubric:
        out.append(f"Rubric: {c.rubric}")
    if c.score is not None:
        s = c.score
        out.append(
            f"Mean score {s.mean_a:.4f} -> {s.mean_b:.4f}: delta {s.mean_delta:+.4f}, "
            f"95% CI [{s.low:+.4f}, {s.high:+.4f}] ({s.method}, n={s.pairs})."
        )
    if c.criteria:
        name_width = max(9, min(28, max(len(k.name) for k in c.criteria)))
        out.append("")
        out.append(f"{'criterion'.ljust(name_width)}  before   after  pass>fail  fail>pass")
        for k in c.criteria:
            mark = " (dropped)" if k.dropped else ""
            out.append(
                f"{_fit(k.name, name_width).ljust(name_width)}  {_rate(k.pass_rate_a)}  "
                f"{_rate(k.pass_rate_b)}  {len(k.passed_to_failed):9d}  "
                f"{len(k.failed_to_passed):9d}{mark}"
            )
    if c.outcome_changes:
        out.append("")
        out.append("Outcome changes:")
        for change in c.outcome_changes:
            out.append(f"  {change.before or 'none'} -> {change.after or 'none'}: {change.count}")
    for title, cases in (
        ("Cases that flipped pass -> fail", c.cases_regressed),
        ("Cases that flipped fail -> pass", c.cases_improved),
    ):
        if cases:
            shown = ", ".join(cases[:10]) + (
                f", … ({len(cases) - 10} more)" if len(cases) > 10 else ""
            )
            out.append(f"{title} ({len(cases)}): {shown}")
    out.append("")
    if c.regressions:
        out += [f"regression: {message}" for message in c.regressions]
    else:
        out.append("No regression.")
    return "\n".join(_wrap(out, width))
