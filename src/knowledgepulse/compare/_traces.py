"""Two traces side by side: where they parted, which calls only one made, which verdicts flipped."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from itertools import pairwise, zip_longest
from typing import TYPE_CHECKING, Any

from .._schema import ReasoningTrace, Step
from ._align import lcs_pairs
from ._trace_comparison import (
    DIFF_SCHEMA,
    AlignedRow,
    ArgumentChange,
    CallRef,
    ComparisonError,
    CopyRelation,
    CriterionFlip,
    Direction,
    FieldChange,
    PartingStep,
    Relation,
    Side,
    StepRef,
    TraceComparison,
    TraceSide,
)

if TYPE_CHECKING:
    from ..rubrics import EvaluationResult, Rubric

__all__ = [
    "DIFF_SCHEMA",
    "AlignedRow",
    "ArgumentChange",
    "CallRef",
    "ComparisonError",
    "CriterionFlip",
    "FieldChange",
    "PartingStep",
    "StepRef",
    "TraceComparison",
    "TraceSide",
    "compare_traces",
]

_LABEL = 160
_CALL_TYPES = ("tool_call", "error_recovery")


# -- building ----------------------------------------------------------------------------------


def _one_line(text: str, limit: int = _LABEL) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _canonical(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def _is_call(step: Step) -> bool:
    return step.type in ("tool_call", "error_recovery") and step.tool is not None


def _ref(step: Step) -> StepRef:
    tool = step.tool.name if step.tool is not None else None
    if _is_call(step):
        label = f"{tool}({_canonical(step.input or {})})"
    else:
        text = step.content or step.output_summary or ""
        label = f"{tool}: {text}" if tool and step.type == "observation" else text
    return StepRef(step=step.step_id, type=step.type, tool=tool, label=_one_line(label))


def _message_key(step: Step) -> tuple[str, str | None, str]:
    tool = step.tool.name if step.tool is not None else None
    text = step.content or step.output_summary or ""
    return step.type, tool, " ".join(text.split()).casefold()


def _call_key(step: Step) -> tuple[str, str]:
    assert step.tool is not None
    return step.tool.name, _canonical(step.input or {})


def _field_changes(a: Any, b: Any, path: str = "") -> Iterator[FieldChange]:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in b:
                yield FieldChange(path=where, a=a[key], only_in="a")
            elif key not in a:
                yield FieldChange(path=where, b=b[key], only_in="b")
            else:
                yield from _field_changes(a[key], b[key], where)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b)):
            yield from _field_changes(x, y, f"{path}[{index}]")
    elif _canonical(a) != _canonical(b):
        yield FieldChange(path=path or "(arguments)", a=a, b=b)


def _results(trace: ReasoningTrace) -> dict[int, int]:
    """Position of each call -> position of the observation that answered it."""
    from ..behaviours import tool_calls

    position = {step.step_id: i for i, step in enumerate(trace.steps)}
    return {
        position[call.step_id]: position[call.result_step]
        for call in tool_calls(trace)
        if call.result_step is not None and call.step_id in position
    }


def _align(a: ReasoningTrace, b: ReasoningTrace) -> tuple[list[AlignedRow], list[tuple[int, int]]]:
    """The rows, and the (position in a, position in b) of calls aligned with other arguments."""
    steps_a, steps_b = a.steps, b.steps
    calls_a = [i for i, step in enumerate(steps_a) if _is_call(step)]
    calls_b = [j for j, step in enumerate(steps_b) if _is_call(step)]
    keys_a = [_call_key(steps_a[i]) for i in calls_a]
    keys_b = [_call_key(steps_b[j]) for j in calls_b]
    same = lcs_pairs(keys_a, keys_b)
    # Between two calls made alike, calls of one tool with other arguments are aligned too.
    changed: list[tuple[int, int]] = []
    bounds = [(-1, -1), *same, (len(calls_a), len(calls_b))]
    for (i0, j0), (i1, j1) in pairwise(bounds):
        names_a = [keys_a[i][0] for i in range(i0 + 1, i1)]
        names_b = [keys_b[j][0] for j in range(j0 + 1, j1)]
        changed += [(i0 + 1 + x, j0 + 1 + y) for x, y in lcs_pairs(names_a, names_b)]
    relation: dict[tuple[int, int], Relation] = {}
    for x, y in same:
        relation[calls_a[x], calls_b[y]] = "same"
    changed_steps = [(calls_a[x], calls_b[y]) for x, y in changed]
    for pair in changed_steps:
        relation[pair] = "arguments_differ"
    # The answers of aligned calls are aligned with them.
    results_a, results_b = _results(a), _results(b)
    for i, j in list(relation):
        if i in results_a and j in results_b:
            ra, rb = results_a[i], results_b[j]
            same_answer = _message_key(steps_a[ra])[2] == _message_key(steps_b[rb])[2]
            relation[ra, rb] = "same" if same_answer else "result_differs"
    anchors: list[tuple[int, int]] = []
    for i, j in sorted(relation):  # kept only while increasing in both runs
        if not anchors or (i > anchors[-1][0] and j > anchors[-1][1]):
            anchors.append((i, j))
    rows: list[AlignedRow] = []
    bounds = [(-1, -1), *anchors, (len(steps_a), len(steps_b))]
    for (i0, j0), (i1, j1) in pairwise(bounds):
        if i0 >= 0:
            rows.append(
                AlignedRow(a=_ref(steps_a[i0]), b=_ref(steps_b[j0]), relation=relation[i0, j0])
            )
        rows += _gap_rows(steps_a[i0 + 1 : i1], steps_b[j0 + 1 : j1])
    return rows, changed_steps


def _gap_rows(gap_a: Sequence[Step], gap_b: Sequence[Step]) -> list[AlignedRow]:
    """The steps between two anchors: messages said alike aligned, the rest side by side."""
    rows: list[AlignedRow] = []
    matched = lcs_pairs(
        [_message_key(s) if not _is_call(s) else ("call", id(s)) for s in gap_a],
        [_message_key(s) if not _is_call(s) else ("call", -1 - id(s)) for s in gap_b],
    )
    bounds = [(-1, -1), *matched, (len(gap_a), len(gap_b))]
    for (i0, j0), (i1, j1) in pairwise(bounds):
        if i0 >= 0:
            rows.append(AlignedRow(a=_ref(gap_a[i0]), b=_ref(gap_b[j0]), relation="same"))
        for x, y in zip_longest(gap_a[i0 + 1 : i1], gap_b[j0 + 1 : j1]):
            kind: Relation = "different" if x and y else "only_a" if x else "only_b"
            rows.append(
                AlignedRow(
                    a=_ref(x) if x else None,
                    b=_ref(y) if y else None,
                    relation=kind,
                )
            )
    return rows


_PARTING_REASONS: dict[str, str] = {
    "arguments_differ": "the same tool called with other arguments",
    "result_differs": "the same call answered differently",
    "different": "different steps",
    "only_a": "a step only A took",
    "only_b": "a step only B took",
}


def _parting(rows: Sequence[AlignedRow], *, calls_only: bool = False) -> PartingStep | None:
    for index, row in enumerate(rows):
        if calls_only and not any(
            ref is not None and ref.type in _CALL_TYPES and ref.tool is not None
            for ref in (row.a, row.b)
        ):
            continue
        if row.relation != "same":
            reason = _PARTING_REASONS[row.relation]
            if row.relation == "only_a" and all(r.relation == "only_a" for r in rows[index:]):
                reason = "B ended here; A went on"
            elif row.relation == "only_b" and all(r.relation == "only_b" for r in rows[index:]):
                reason = "A ended here; B went on"
            return PartingStep(
                row=index,
                step_a=row.a.step if row.a else None,
                step_b=row.b.step if row.b else None,
                relation=row.relation,
                reason=reason,
            )
    return None


def _unaligned_calls(
    trace: ReasoningTrace, rows: Sequence[AlignedRow], side: Side
) -> list[CallRef]:
    aligned = {
        ref.step
        for row in rows
        if row.relation in ("same", "arguments_differ", "result_differs")
        for ref in [row.a if side == "a" else row.b]
        if ref is not None
    }
    return [
        CallRef(step=step.step_id, tool=step.tool.name, arguments=dict(step.input or {}))
        for step in trace.steps
        if _is_call(step) and step.tool is not None and step.step_id not in aligned
    ]


def _side(trace: ReasoningTrace, result: EvaluationResult | None) -> TraceSide:
    return TraceSide(
        id=trace.id,
        steps=len(trace.steps),
        tool_calls=sum(1 for step in trace.steps if _is_call(step)),
        success=trace.metadata.success,
        score=result.score if result else None,
        outcome=result.outcome_type.value if result and result.outcome_type else None,
    )


def _reason(result: EvaluationResult, name: str) -> str:
    if name in result.errors:
        return f"the check raised {result.errors[name]}"
    if name in result.undetermined:
        return result.undetermined[name]
    verdict = result.verdicts.get(name)
    if verdict is not None and verdict.reasoning:
        return verdict.reasoning
    passed = result.details.get(name)
    return "passed" if passed else "failed" if passed is False else "undetermined"


def _verdict_steps(result: EvaluationResult, name: str) -> list[int]:
    """The steps the criterion's verdict names (a behaviour check's finding, a judge's
    answer); none for a check that answered a plain yes or no."""
    # Read from the evaluation rather than by running the check again: on two 500-step
    # traces a second run of each flipped behaviour check cost as much as the evaluation.
    verdict = result.verdicts.get(name)
    return list(verdict.steps) if verdict is not None else []


def _flips(
    rubric: Rubric, result_a: EvaluationResult, result_b: EvaluationResult
) -> list[CriterionFlip]:
    flips = []
    for criterion in rubric.criteria:
        before = result_a.details.get(criterion.name)
        after = result_b.details.get(criterion.name)
        if before == after:
            continue
        direction: Direction = (
            "regressed"
            if before is True and after is False
            else "improved"
            if before is False and after is True
            else "changed"
        )
        flips.append(
            CriterionFlip(
                name=criterion.name,
                weight=result_a.weights.get(criterion.name, criterion.weight),
                a=before,
                b=after,
                direction=direction,
                reason_a=_reason(result_a, criterion.name),
                reason_b=_reason(result_b, criterion.name),
                steps_a=_verdict_steps(result_a, criterion.name),
                steps_b=_verdict_steps(result_b, criterion.name),
            )
        )
    # Regressions first: they are what a reader of a diff looks for.
    order = {"regressed": 0, "improved": 1, "changed": 2}
    return sorted(flips, key=lambda flip: order[flip.direction])


def _resolve(rubric: Rubric | str | bool | None) -> Rubric | None:
    from ..rubrics import Rubric, resolve_rubric

    if rubric is None or rubric is False:
        return None
    if rubric is True:
        rubric = "agent"
    if isinstance(rubric, Rubric):
        return rubric.validate()
    return resolve_rubric(rubric).validate()


def compare_traces(
    a: ReasoningTrace, b: ReasoningTrace, *, rubric: Rubric | str | bool | None = None
) -> TraceComparison:
    """Compare two runs: align them, name where they parted, and what changed.

    Args:
        a: the run before (the baseline).
        b: the run after.
        rubric: evaluate both with this rubric (a :class:`~knowledgepulse.rubrics.Rubric`, a
            name or import path as ``kp eval --rubric`` takes, ``True`` for the built-in
            ``agent`` rubric) and list the criteria whose verdict flipped, each with its reason
            and the steps its verdict names (a behaviour check's finding, a judge's steps).
            ``None``: no rubric.

    Returns:
        A :class:`TraceComparison`.

    Raises:
        RubricLoadError: ``rubric`` names no rubric.
    """
    from ..copies import COPY_SIMILARITY, copy_facets, estimated_similarity

    facet_a, facet_b = copy_facets([a, b])
    identical = facet_a.digest == facet_b.digest
    similarity = 1.0 if identical else 0.0
    if not identical and facet_a.signature is not None and facet_b.signature is not None:
        similarity = round(float(estimated_similarity(facet_a.signature, facet_b.signature)), 6)
    copy_relation: CopyRelation | None = (
        "exact" if identical else "near_copy" if similarity >= COPY_SIMILARITY else None
    )
    rows, changed = _align(a, b)
    by_id_a = {i: step for i, step in enumerate(a.steps)}
    by_id_b = {j: step for j, step in enumerate(b.steps)}
    argument_changes = []
    for i, j in changed:
        step_a, step_b = by_id_a[i], by_id_b[j]
        assert step_a.tool is not None
        argument_changes.append(
            ArgumentChange(
                step_a=step_a.step_id,
                step_b=step_b.step_id,
                tool=step_a.tool.name,
                fields=list(_field_changes(step_a.input or {}, step_b.input or {})),
            )
        )
    chosen = _resolve(rubric)
    result_a = result_b = None
    flipped: list[CriterionFlip] = []
    if chosen is not None:
        from ..rubrics import Case

        result_a = chosen.evaluate(Case(trace=a, case_id=a.id))
        result_b = chosen.evaluate(Case(trace=b, case_id=b.id))
        flipped = _flips(chosen, result_a, result_b)
    side_a, side_b = _side(a, result_a), _side(b, result_b)
    notes = []
    for name, side in (("A", side_a), ("B", side_b)):
        if side.tool_calls == 0:
            notes.append(f"{name} ({side.id}) made no tool call: aligned by its messages only")
    parting = None if identical else _parting(rows)
    parting_call = None if identical else _parting(rows, calls_only=True)
    comparison = TraceComparison(
        a=side_a,
        b=side_b,
        identical=identical,
        copy_relation=copy_relation,
        similarity=similarity,
        parting=parting,
        parting_call=parting_call,
        rows=rows,
        same_steps=sum(1 for row in rows if row.relation == "same"),
        only_a_calls=_unaligned_calls(a, rows, "a"),
        only_b_calls=_unaligned_calls(b, rows, "b"),
        argument_changes=argument_changes,
        rubric=chosen.name if chosen is not None else None,
        flipped=flipped,
        notes=notes,
        explanation="",
    )
    return comparison.model_copy(update={"explanation": _explain(comparison)})


def _explain(c: TraceComparison) -> str:
    if c.identical:
        return f"{c.a.id} and {c.b.id} are identical (exact copies): nothing parted."
    sentences = [f"{c.same_steps} of {len(c.rows)} aligned rows are the same."]
    if c.parting is None:
        sentences.append("No step differs (the texts differ only in ways the steps do not show).")
    else:
        p = c.parting
        sentences.append(
            f"They part at row {p.row}: step {_show(p.step_a)} of A, step {_show(p.step_b)} "
            f"of B ({p.reason})."
        )
    sentences.append(
        f"Calls only A made: {len(c.only_a_calls)}; only B: {len(c.only_b_calls)}; "
        f"calls with other arguments: {len(c.argument_changes)}."
    )
    if c.rubric is not None:
        if c.flipped:
            names = ", ".join(f"{f.name} ({f.direction})" for f in c.flipped)
            sentences.append(f"Flipped criteria of the {c.rubric} rubric: {names}.")
        else:
            sentences.append(f"No criterion of the {c.rubric} rubric flipped.")
    return " ".join(sentences)


def _show(step: int | None) -> str:
    return "-" if step is None else str(step)
