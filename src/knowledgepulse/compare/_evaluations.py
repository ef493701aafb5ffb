"""Two runs of an evaluation (two ``kp eval`` or two ``kp score`` outputs) compared case by case."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

from ._render import fit, wrap_prose
from ._trace_comparison import DIFF_SCHEMA, ComparisonError, DiffSchema

if TYPE_CHECKING:
    from ..records import EvalRecord, ScoreRecord
    from ..rubrics import EvaluationResult

__all__ = [
    "CriterionChange",
    "EvaluationComparison",
    "OutcomeChange",
    "ResultsFile",
    "ResultsSide",
    "ScoreDelta",
    "compare_evaluations",
    "load_results",
    "paired_t_interval",
    "results_kind",
]

#: What a results file holds: kp eval lines or kp score lines.
RecordKind = Literal["eval", "score"]
#: How two runs' results are paired: by trace id, or by task (the k-th attempt at a task with
#: the k-th).
PairBy = Literal["id", "task"]

#: Student's t quantile at 0.975 for 1..30 degrees of freedom (6 decimals); beyond, the
#: Cornish-Fisher expansion below, within 3e-8 of the exact quantile from 31 on.
_T975 = (
    12.706205, 4.302653, 3.182446, 2.776445, 2.570582, 2.446912, 2.364624, 2.306004, 2.262157,
    2.228139, 2.200985, 2.178813, 2.160369, 2.144787, 2.131450, 2.119905, 2.109816, 2.100922,
    2.093024, 2.085963, 2.079614, 2.073873, 2.068658, 2.063899, 2.059539, 2.055529, 2.051831,
    2.048407, 2.045230, 2.042272,
)  # fmt: skip
_Z975 = 1.959963984540054
_TOLERANCE = 1e-9
_METHOD = "paired t"


def t_quantile_975(df: int) -> float:
    """Student's t quantile at 0.975 with ``df`` degrees of freedom (``df`` >= 1)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T975):
        return _T975[df - 1]
    z = _Z975
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def paired_t_interval(deltas: Sequence[float]) -> tuple[float, float, float]:
    """(mean, low, high): the mean of paired differences and its 95 % t interval.

    One pair gives no spread: the interval is the mean itself on both ends.
    """
    n = len(deltas)
    if n == 0:
        raise ValueError("no pair to take an interval over")
    mean = math.fsum(deltas) / n
    if n == 1:
        return mean, mean, mean
    variance = math.fsum((d - mean) ** 2 for d in deltas) / (n - 1)
    half = t_quantile_975(n - 1) * math.sqrt(variance / n)
    return mean, mean - half, mean + half


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResultsSide(_Frozen):
    """One of the two runs: its name (the file), lines, rubric, mean score and success rate."""

    name: str
    cases: int
    rubric: str | None = None
    mean_score: float | None = None
    pass_rate: float | None = Field(
        default=None,
        description="Share of cases that passed: successful_completion for eval lines, "
        "passed (the --threshold) for score lines; null when no line says.",
    )


class CriterionChange(_Frozen):
    """One criterion over the paired cases: pass rate before and after, and the cases that
    flipped each way."""

    name: str
    pass_rate_a: float | None = Field(
        description="Passed on A among the paired cases determined on both sides (null: none)."
    )
    pass_rate_b: float | None
    compared: int = Field(description="Paired cases determined on both sides.")
    determined_a: int
    determined_b: int
    passed_to_failed: list[str]
    failed_to_passed: list[str]
    dropped: bool = Field(description="The pass rate is lower on B (by more than 1e-9).")


class OutcomeChange(_Frozen):
    """Cases whose outcome class changed from ``before`` to ``after`` (null: undetermined)."""

    before: str | None
    after: str | None
    count: int
    cases: list[str]


class ScoreDelta(_Frozen):
    """Score B minus score A over the paired cases, with a paired 95 % confidence interval."""

    pairs: int
    mean_a: float
    mean_b: float
    mean_delta: float
    low: float
    high: float
    method: str = Field(
        default=_METHOD,
        description="paired t: mean difference ± t(0.975, n-1) · sd / √n.",
    )


class EvaluationComparison(_Frozen):
    """Two runs of an evaluation compared (``kp diff RESULTS_A RESULTS_B``). Frozen;
    ``model_dump_json()`` round-trips; :meth:`render` is the terminal view."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: DiffSchema = Field(default=DIFF_SCHEMA, alias="schema")
    kind: Literal["evaluations"] = "evaluations"
    record_kind: RecordKind
    by: PairBy
    a: ResultsSide
    b: ResultsSide
    rubric: str | None
    paired: int
    only_a: list[str] = Field(description="Cases only A has (not compared).")
    only_b: list[str]
    criteria: list[CriterionChange]
    outcome_changes: list[OutcomeChange]
    cases_regressed: list[str] = Field(description="Cases that passed on A and failed on B.")
    cases_improved: list[str]
    score: ScoreDelta | None
    regressions: list[str] = Field(
        description="Why B regressed: a criterion's pass rate dropped, a case flipped "
        "pass -> fail. Empty when none did."
    )
    regressed: bool
    explanation: str

    def render(self, width: int = 80) -> str:
        """The terminal view, each line at most ``width`` characters."""
        return render_evaluations(self, width)


@dataclass(frozen=True)
class ResultsFile:
    """The result lines of one file, all of one kind (``eval`` or ``score``)."""

    name: str
    kind: RecordKind
    records: list[EvalRecord] | list[ScoreRecord]


def results_kind(path: str) -> RecordKind | None:
    """``eval`` or ``score`` when the file's first record is a ``kp eval`` / ``kp score`` line
    (by its ``schema`` field), else ``None`` (a trace file, say)."""
    from ..io._reader import iter_records
    from ..records import EVAL_SCHEMA, SCORE_SCHEMA

    for record in iter_records([path]):
        if record.error is not None or not isinstance(record.data, dict):
            return None
        kind = record.data.get("schema")
        return "eval" if kind == EVAL_SCHEMA else "score" if kind == SCORE_SCHEMA else None
    return None


def load_results(path: str) -> ResultsFile:
    """Every result line of ``path``. Raises :class:`ComparisonError` naming ``file:line`` for a
    line that is no result, a file of both kinds, or a file with none."""
    from ..io._reader import iter_records
    from ..records import EvalRecord, parse_output_record

    evals: list[EvalRecord] = []
    scores: list[ScoreRecord] = []
    for record in iter_records([path]):
        where = f"{record.source}:{record.line}"
        if record.error is not None:
            raise ComparisonError(f"{where}: {record.error}")
        try:
            parsed = parse_output_record(record.data)
        except ValueError as exc:
            raise ComparisonError(f"{where}: not a kp eval or kp score line: {exc}") from None
        if isinstance(parsed, EvalRecord):
            evals.append(parsed)
        else:
            scores.append(parsed)
        if evals and scores:
            raise ComparisonError(f"{where}: {path} mixes kp eval and kp score lines")
    if evals:
        return ResultsFile(path, "eval", evals)
    if scores:
        return ResultsFile(path, "score", scores)
    raise ComparisonError(f"{path}: no kp eval or kp score line")


@dataclass(frozen=True)
class _Case:
    key: str
    score: float
    passed: bool | None
    outcome: str | None
    details: dict[str, bool | None]
    weights: dict[str, float] = field(default_factory=dict)


def _case(item: EvaluationResult | ScoreRecord) -> _Case:
    from ..records import ScoreRecord
    from ..rubrics import OutcomeType

    if isinstance(item, ScoreRecord):
        return _Case(item.id, item.score, item.passed, None, {})
    outcome = item.outcome_type
    passed = None if outcome is None else outcome == OutcomeType.SUCCESSFUL_COMPLETION
    return _Case(
        item.case_id or "",
        item.score,
        passed,
        outcome.value if outcome else None,
        item.details,
        dict(item.weights or {}),
    )


def _where(item: EvaluationResult | ScoreRecord, position: int, name: str) -> str:
    source, line = getattr(item, "source", None), getattr(item, "line", None)
    return f"{name} line {position + 1}" if not source else f"{source}:{line}"


def _keyed(
    items: Sequence[EvaluationResult | ScoreRecord], by: str, name: str
) -> dict[str, tuple[_Case, EvaluationResult | ScoreRecord]]:
    keyed: dict[str, tuple[_Case, EvaluationResult | ScoreRecord]] = {}
    first_at: dict[str, str] = {}
    attempts: Counter[str] = Counter()
    for position, item in enumerate(items):
        case = _case(item)
        where = _where(item, position, name)
        if by == "id":
            if not case.key:
                raise ComparisonError(f"{where}: the case has no id to pair it by (try --by task)")
            key = case.key
            if key in keyed:
                raise ComparisonError(
                    f"{where}: case {key!r} appears twice in {name} (first at {first_at[key]}); "
                    "pair attempts with --by task"
                )
        else:
            group = getattr(item, "group", None) or {}
            task = next((value for value in group.values() if value is not None), None)
            if task is None:
                raise ComparisonError(
                    f"{where}: the line names no task (write it with kp eval / kp score "
                    "--group-by task)"
                )
            # The k-th attempt at a task in A is paired with the k-th in B.
            key = f"{task}#{attempts[task]}"
            attempts[task] += 1
        first_at[key] = where
        keyed[key] = (case, item)
    return keyed


def _rubrics(items: Iterable[EvaluationResult | ScoreRecord]) -> set[str]:
    return {rubric for item in items if isinstance(rubric := getattr(item, "rubric", None), str)}


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _rate(flags: Iterable[bool | None]) -> float | None:
    known = [flag for flag in flags if flag is not None]
    return sum(known) / len(known) if known else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 12)


def compare_evaluations(
    results_a: Sequence[EvaluationResult | ScoreRecord],
    results_b: Sequence[EvaluationResult | ScoreRecord],
    *,
    by: PairBy = "id",
    names: tuple[str, str] = ("A", "B"),
) -> EvaluationComparison:
    """Compare two runs of an evaluation case by case.

    Args:
        results_a: the run before: ``kp eval`` results (:class:`~knowledgepulse.rubrics.EvaluationResult`
            or :class:`~knowledgepulse.records.EvalRecord`) or ``kp score`` lines
            (:class:`~knowledgepulse.records.ScoreRecord`).
        results_b: the run after, of the same kind.
        by: pair cases by their id, or by task (the k-th attempt at a task in A with the k-th in
            B; the task is the line's ``group``, written by ``--group-by task``).
        names: how messages name the two runs (their files).

    Returns:
        An :class:`EvaluationComparison`: per criterion the pass rate before and after over
        the paired cases and the cases flipped each way, outcome-class changes, the score
        delta with a paired t 95 % interval, and the regressions.

    Raises:
        ComparisonError: the runs are of different kinds or rubrics (naming both), a case has
            no id (or no task with ``by="task"``), an id appears twice.
    """
    from ..records import ScoreRecord

    if by not in ("id", "task"):
        raise ComparisonError(f"by: expected 'id' or 'task', got {by!r}")
    kinds = {
        side: {"score" if isinstance(item, ScoreRecord) else "eval" for item in items}
        for side, items in ((names[0], results_a), (names[1], results_b))
    }
    for side, found in kinds.items():
        if len(found) > 1:
            raise ComparisonError(f"{side} mixes kp eval and kp score results")
    kind_a = next(iter(kinds[names[0]]), None)
    kind_b = next(iter(kinds[names[1]]), None)
    if kind_a is None or kind_b is None:
        empty = names[0] if kind_a is None else names[1]
        raise ComparisonError(f"{empty} holds no result to compare")
    if kind_a != kind_b:
        raise ComparisonError(
            f"{names[0]} holds kp {kind_a} results and {names[1]} kp {kind_b} results: "
            "compare two of one kind"
        )
    rubrics_a, rubrics_b = _rubrics(results_a), _rubrics(results_b)
    for side, found in ((names[0], rubrics_a), (names[1], rubrics_b)):
        if len(found) > 1:
            raise ComparisonError(f"{side} holds results of several rubrics: {sorted(found)}")
    if rubrics_a != rubrics_b:
        raise ComparisonError(
            f"{names[0]} was graded with rubric {next(iter(rubrics_a), None)!r} and {names[1]} "
            f"with rubric {next(iter(rubrics_b), None)!r}: results of different rubrics are "
            "not compared"
        )
    keyed_a = _keyed(results_a, by, names[0])
    keyed_b = _keyed(results_b, by, names[1])
    paired = [key for key in keyed_a if key in keyed_b]
    pairs = [(keyed_a[key][0], keyed_b[key][0]) for key in paired]
    criteria, regressions = _criterion_changes(paired, pairs)
    outcomes: dict[tuple[str | None, str | None], list[str]] = defaultdict(list)
    for key, (a, b) in zip(paired, pairs):
        if kind_a == "eval" and a.outcome != b.outcome:
            outcomes[a.outcome, b.outcome].append(key)
    outcome_changes = [
        OutcomeChange(before=before, after=after, count=len(keys), cases=keys)
        for (before, after), keys in sorted(
            outcomes.items(), key=lambda item: (-len(item[1]), str(item[0]))
        )
    ]
    regressed_cases = [
        k for k, (a, b) in zip(paired, pairs) if a.passed is True and b.passed is False
    ]
    improved_cases = [
        k for k, (a, b) in zip(paired, pairs) if a.passed is False and b.passed is True
    ]
    if regressed_cases:
        shown = ", ".join(regressed_cases[:5]) + (" …" if len(regressed_cases) > 5 else "")
        regressions.append(f"{len(regressed_cases)} case(s) flipped pass -> fail: {shown}")
    score = None
    if pairs:
        deltas = [b.score - a.score for a, b in pairs]
        mean, low, high = paired_t_interval(deltas)
        score = ScoreDelta(
            pairs=len(pairs),
            mean_a=round(math.fsum(a.score for a, _ in pairs) / len(pairs), 12),
            mean_b=round(math.fsum(b.score for _, b in pairs) / len(pairs), 12),
            mean_delta=round(mean, 12),
            low=round(low, 12),
            high=round(high, 12),
        )
    rubric = next(iter(rubrics_a), None)
    cases_a = [case for case, _ in keyed_a.values()]
    cases_b = [case for case, _ in keyed_b.values()]
    comparison = EvaluationComparison(
        record_kind=kind_a,
        by=by,
        a=_side(names[0], cases_a, rubric),
        b=_side(names[1], cases_b, rubric),
        rubric=rubric,
        paired=len(pairs),
        only_a=[key for key in keyed_a if key not in keyed_b],
        only_b=[key for key in keyed_b if key not in keyed_a],
        criteria=criteria,
        outcome_changes=outcome_changes,
        cases_regressed=regressed_cases,
        cases_improved=improved_cases,
        score=score,
        regressions=regressions,
        regressed=bool(regressions),
        explanation="",
    )
    return comparison.model_copy(update={"explanation": _explain(comparison)})


def _criterion_changes(
    paired: Sequence[str], pairs: Sequence[tuple[_Case, _Case]]
) -> tuple[list[CriterionChange], list[str]]:
    """Per criterion (in the order first seen) its change over the pairs, and the regressions."""
    names: list[str] = []
    seen: set[str] = set()
    for case_a, case_b in pairs:
        for name in [*case_a.details, *case_b.details]:
            if name not in seen:
                seen.add(name)
                names.append(name)
    criteria = []
    regressions = []
    for name in names:
        verdicts = [
            (key, a.details.get(name), b.details.get(name)) for key, (a, b) in zip(paired, pairs)
        ]
        # The rates are taken over the cases determined on both sides, so that a case that
        # became undetermined moves neither, and a drop means some case flipped pass -> fail.
        both = [(x, y) for _, x, y in verdicts if x is not None and y is not None]
        rate_a = _rate(x for x, _ in both)
        rate_b = _rate(y for _, y in both)
        dropped = rate_a is not None and rate_b is not None and rate_b < rate_a - _TOLERANCE
        change = CriterionChange(
            name=name,
            pass_rate_a=_round(rate_a),
            pass_rate_b=_round(rate_b),
            compared=len(both),
            determined_a=sum(1 for _, x, _ in verdicts if x is not None),
            determined_b=sum(1 for _, _, y in verdicts if y is not None),
            passed_to_failed=[key for key, x, y in verdicts if x is True and y is False],
            failed_to_passed=[key for key, x, y in verdicts if x is False and y is True],
            dropped=dropped,
        )
        criteria.append(change)
        # A diagnostic (weight 0 on both sides) is reported, not gated: it moves no score.
        weighted = any(case.weights.get(name, 1.0) != 0 for a, b in pairs for case in (a, b))
        if dropped and weighted and rate_a is not None and rate_b is not None:
            regressions.append(
                f"criterion {name}: pass rate {rate_a:.1%} -> {rate_b:.1%} "
                f"({len(change.passed_to_failed)} case(s) flipped pass -> fail)"
            )
    return criteria, regressions


def _side(name: str, cases: Sequence[_Case], rubric: str | None) -> ResultsSide:
    mean = _mean([case.score for case in cases])
    return ResultsSide(
        name=name,
        cases=len(cases),
        rubric=rubric,
        mean_score=_round(mean),
        pass_rate=_round(_rate(case.passed for case in cases)),
    )


def _explain(c: EvaluationComparison) -> str:
    sentences = [f"{c.paired} case(s) paired by {c.by}."]
    if c.score is not None:
        s = c.score
        sentences.append(
            f"Mean score {s.mean_a:.4f} -> {s.mean_b:.4f} (delta {s.mean_delta:+.4f}, 95% CI "
            f"{s.low:+.4f} to {s.high:+.4f}, {s.method})."
        )
    sentences.append(
        f"{len(c.cases_regressed)} case(s) flipped pass -> fail, "
        f"{len(c.cases_improved)} fail -> pass."
    )
    dropped = [k.name for k in c.criteria if k.dropped]
    if dropped:
        sentences.append(f"Pass rate dropped: {', '.join(dropped)}.")
    sentences.append("Regressed." if c.regressed else "No regression.")
    return " ".join(sentences)


# -- the terminal view -------------------------------------------------------------------------


def _percent(value: float | None) -> str:
    return "     -" if value is None else f"{value:6.1%}"


def render_evaluations(c: EvaluationComparison, width: int = 80) -> str:
    out = [
        fit(f"A {c.a.name}: {c.a.cases} {c.record_kind} lines", width),
        fit(f"B {c.b.name}: {c.b.cases} {c.record_kind} lines", width),
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
                f"{fit(k.name, name_width).ljust(name_width)}  {_percent(k.pass_rate_a)}  "
                f"{_percent(k.pass_rate_b)}  {len(k.passed_to_failed):9d}  "
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
    return "\n".join(wrap_prose(out, width))
