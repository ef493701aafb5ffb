"""The one report a run returns: what was read, what became of it, why records were refused,
what the verb made of the rest, which gates failed, how long it took and what stopped it.

It renders itself (the text ``kp`` prints at the end of the command) and round-trips to JSON:
``RunReport.model_validate_json(report.model_dump_json()) == report``.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..rubrics import EvaluationReport, OutcomeAgreement
from ._signals import EXIT_OK, EXIT_REJECTED, exit_status_for
from ._tally import LocatedProblem, Tally, accounting_line

if TYPE_CHECKING:
    from ..reporting import ScoreSummary

Verb = Literal["validate", "convert", "redact", "evaluate", "score", "curate"]
#: Why a run ended before its input did: Ctrl-C or SIGTERM, or ``max_errors`` rejections.
StoppedBy = Literal["interrupted", "max_errors"]

# ``steps[0].type: ...``, ``@context: ...``, ``[17].run_type: ...``, ``attributes[gen_ai.x]:``:
# a field path (no spaces) before the first ": "; ``invalid JSON: ...`` names no field.
_FIELD_PATH = re.compile(
    r"^((?:\[[^\]\s]+\]|[@A-Za-z_][\w@$-]*)(?:\.[\w@$-]+|\[[^\]\s]+\])*): (.*)$", re.S
)


class RejectedRecord(BaseModel):
    """One problem of a refused record: where (file, line, and the element of a JSON list),
    which field (None: the record as a whole) and why."""

    model_config = ConfigDict(frozen=True)

    file: str
    line: int
    index: int | None = None
    field: str | None = None
    reason: str

    @classmethod
    def of(cls, located: LocatedProblem) -> RejectedRecord:
        match = _FIELD_PATH.match(located.problem)
        field, reason = (match.group(1), match.group(2)) if match else (None, located.problem)
        return cls(
            file=located.source,
            line=located.line,
            index=located.index,
            field=field,
            reason=reason,
        )

    def __str__(self) -> str:
        """``file:line: field.path: reason``, as the run showed it."""
        problem = self.reason if self.field is None else f"{self.field}: {self.reason}"
        return f"{self.file}:{self.line}: {problem}"


class RunCounts(BaseModel):
    """Every record read, once: ``records_in = processed + rejected + not_processed``.
    ``outputs``: results written (traces, result lines); ``not_runs``: things read that are
    not runs (processed, no trace made)."""

    model_config = ConfigDict(frozen=True)

    records_in: int = 0
    processed: int = 0
    rejected: int = 0
    not_processed: int = 0
    outputs: int = 0
    not_runs: int = 0


class ValidateSummary(BaseModel):
    """``validate_files``: the valid records are the processed ones, the invalid the rejected."""

    kind: Literal["validate"] = "validate"

    def closing(self, report: RunReport) -> list[Any]:
        counts = report.counts
        return [f"{report.accounting()}: {counts.processed} valid, {counts.rejected} invalid"]


class ConvertSummary(BaseModel):
    """``convert_files``: the traces written (a record may hold several, or none)."""

    kind: Literal["convert"] = "convert"
    traces_written: int = 0

    def closing(self, report: RunReport) -> list[Any]:
        not_runs = report.counts.not_runs
        named = f"; not runs: {not_runs} (named above)" if not_runs else ""
        return [f"{report.accounting()}; traces written: {self.traces_written}{named}"]


class RedactSummary(BaseModel):
    """``redact_files``: the traces written and the values replaced, by kind."""

    kind: Literal["redact"] = "redact"
    traces_written: int = 0
    redacted: dict[str, int] = Field(default_factory=dict)

    def closing(self, report: RunReport) -> list[Any]:
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(self.redacted.items()))
        return [
            f"{report.accounting()}; traces written: {self.traces_written}",
            f"redacted: {kinds or 'nothing'}",
        ]


class EvaluateSummary(BaseModel):
    """``evaluate_files``: the rubric's report over the cases graded and, where the traces
    said whether they succeeded, how the rubric's verdicts agree with them."""

    kind: Literal["evaluate"] = "evaluate"
    rubric: str
    evaluation: EvaluationReport
    agreement: OutcomeAgreement | None = None

    def closing(self, report: RunReport) -> list[Any]:
        parts: list[Any] = [self.evaluation]
        if self.agreement is not None and self.agreement.count:
            parts.append(self.agreement)
        parts.append(report.accounting())
        return parts


class ScoreDomain(BaseModel):
    """The scores of one task domain: how many, their mean, how many passed."""

    domain: str
    count: int
    mean: float
    passed: int


class ScoreRunSummary(BaseModel):
    """``score_files``: the distribution of the scores written (figures over no trace are 0),
    per domain, and the summary as ``kp score`` prints it (``lines``)."""

    kind: Literal["score"] = "score"
    traces_scored: int = 0
    threshold: float | None = None
    passed: int = 0
    minimum: float = 0.0
    median: float = 0.0
    mean: float = 0.0
    maximum: float = 0.0
    histogram: list[int] = Field(default_factory=list)
    domains: list[ScoreDomain] = Field(default_factory=list)
    lines: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, summary: ScoreSummary, *, width: int = 80) -> ScoreRunSummary:
        """The figures of ``summary``, and its rendering ``width`` columns wide."""
        if not summary.count:
            return cls(threshold=summary.threshold)
        return cls(
            traces_scored=summary.count,
            threshold=summary.threshold,
            passed=summary.passed,
            minimum=summary.minimum,
            median=summary.median,
            mean=summary.mean,
            maximum=summary.maximum,
            histogram=summary.histogram(),
            domains=[
                ScoreDomain(domain=d.domain, count=d.count, mean=d.mean, passed=d.passed)
                for d in summary.domains()
            ],
            lines=_console_text([summary.render()], width).splitlines(),
        )

    def closing(self, report: RunReport) -> list[Any]:
        parts: list[Any] = []
        if report.interrupted:
            parts.append("interrupted: the output holds every line written so far")
        parts.append(report.accounting())
        parts.extend(self.lines)
        elapsed = report.timings.get("total", 0.0)
        rate = self.traces_scored / elapsed if elapsed > 0 else 0.0
        parts.append(f"took {elapsed:.2f} s ({rate:,.0f} traces/s)")
        return parts


class CurateFirstPass(BaseModel):
    """With a first pass (``--first-pass static``): the candidate pairs its cheap vectors
    proposed, and the traces the deciding embedder embedded to decide them (``reused``: of
    those, the vectors an earlier, stopped run left in the work directory)."""

    candidate_pairs: int
    #: The first pass's cosine from which a pair was a candidate (None: not said, on Ray).
    candidate_similarity: float | None = None
    decided: int
    reused: int = 0


#: How a curation groups traces: ``copies`` (digest and MinHash), ``task`` (attempts at one
#: task), ``embedding`` (whole-trace cosine).
CurateBy = Literal["copies", "task", "embedding"]
#: When a stop came in a curation: while it read the traces, or while it grouped them.
CurateStop = Literal["reading", "curating"]


class CurateSummary(BaseModel):
    """``curate_files``: the traces curated (repeated ids once), how many were kept and
    dropped in how many groups, by which relation, and what the engine did (embedded, reused,
    the first pass); after a stop, when it came (``stopped_while``) and the vectors left in
    ``work_dir`` for the next run."""

    kind: Literal["curate"] = "curate"
    by: CurateBy
    engine: Literal["local", "ray"] = "local"
    similarity: float
    embedder: str | None = None
    traces: int = 0
    kept: int = 0
    dropped: int = 0
    groups: int = 0
    by_relation: dict[str, int] = Field(default_factory=dict)
    #: Traces whose id came earlier (read, counted once).
    repeated: int = 0
    #: Copies: traces with no word, kept without being compared.
    wordless: int = 0
    #: Streaming ``embedding``: texts embedded in this run, and vectors an earlier run left.
    embedded: int | None = None
    reused: int = 0
    first_pass: CurateFirstPass | None = None
    work_dir: str | None = None
    #: After a stop: the embeddings kept in ``work_dir`` for the next run (None: none kept).
    stored_vectors: int | None = None
    stopped_while: CurateStop | None = None

    @property
    def streamed(self) -> bool:
        """Whether the traces streamed through the work directory (else: read into memory)."""
        return self.engine == "local" and self.by != "task"

    def closing(self, report: RunReport) -> list[Any]:
        if self.stopped_while is not None:
            return [report.accounting(), self.stop_line()]
        lines = [report.accounting(), *self.result_lines()]
        if self.streamed:
            if self.wordless:
                lines.append(f"not compared: {self.wordless} traces with no word (all kept)")
            if self.repeated:
                lines.append(self.repeated_line())
            if self.reused:
                lines.append(
                    f"embeddings: {self.reused:,} reused from an earlier run, "
                    f"{self.embedded or 0:,} made"
                )
            if self.first_pass is not None:
                lines.append(self.first_pass_line())
            lines.append(self.took_line(report.timings))
            return lines
        if self.first_pass is not None:
            lines.append(self.first_pass_line())
        if self.repeated:
            lines.append(self.repeated_line())
        return lines

    def stop_line(self) -> str:
        """What a stopped run wrote (nothing) and kept for the next run."""
        when = "before" if self.stopped_while == "reading" else "while"
        line = f"interrupted {when} curating: nothing was written"
        if self.stored_vectors is not None:
            line += (
                f"; {self.stored_vectors:,} embeddings are kept in {self.work_dir} for the next run"
            )
        return line

    def result_lines(self) -> list[str]:
        """``traces: N   kept K   dropped D as ... in G groups (...)`` and, for copies and
        tasks, the drops by relation."""
        head = f"traces: {self.traces}   kept {self.kept}   dropped {self.dropped} as "
        if self.by == "embedding":
            return [
                head + f"near-duplicates (cosine ≥ {self.similarity:g}) in {self.groups} groups"
            ]
        if self.by == "task":
            what, how = "attempts at one task", f"task cosine ≥ {self.similarity:g}"
        else:
            what, how = "copies", f"exact, or estimated Jaccard ≥ {self.similarity:g}"
        lines = [head + f"{what} in {self.groups} groups ({how})"]
        if self.by_relation:
            relations = sorted(self.by_relation.items())
            lines.append(
                "dropped by relation: " + ", ".join(f"{name} {count}" for name, count in relations)
            )
        return lines

    def repeated_line(self) -> str:
        return f"repeated ids: {self.repeated} traces read twice counted once"

    def first_pass_line(self) -> str:
        first = self.first_pass
        assert first is not None
        if self.engine == "ray":
            return (
                f"first pass: {first.candidate_pairs:,} candidate pairs; {self.embedder} "
                f"embedded {first.decided:,} of {self.traces:,} traces on Ray"
            )
        line = (
            f"first pass: {first.candidate_pairs:,} candidate pairs (static cosine ≥ "
            f"{first.candidate_similarity:g}); {self.embedder} decided them, "
            f"embedding {first.decided:,} of {self.traces:,} traces"
        )
        if first.reused:
            line += f" ({first.reused:,} reused from an earlier run)"
        return line

    def took_line(self, timings: dict[str, float]) -> str:
        """``took 12.3 s (812 traces/s): read 2.0 s, embed 8.1 s, search 1.9 s, write 0.3 s``
        (copies: ``hash`` and ``group`` for ``embed`` and ``search``)."""
        total = timings.get("total", 0.0)
        rate = self.traces / total if total > 0 else 0.0
        names = ("hash", "group") if self.by == "copies" else ("embed", "search")
        parts = ", ".join(
            f"{name} {timings.get(name, 0.0):.1f} s" for name in ("read", *names, "write")
        )
        return f"took {total:.1f} s ({rate:,.0f} traces/s): {parts}"


Summary = Annotated[
    ValidateSummary
    | ConvertSummary
    | RedactSummary
    | EvaluateSummary
    | ScoreRunSummary
    | CurateSummary,
    Field(discriminator="kind"),
]


def _console_text(parts: list[Any], width: int) -> str:
    """``parts`` as kp prints them on a file or pipe ``width`` columns wide (its stderr)."""
    import io

    from rich.console import Console

    out = io.StringIO()
    console = Console(
        file=out, width=width, color_system=None, highlight=False, soft_wrap=True, emoji=False
    )
    for part in parts:
        console.print(part, markup=False, highlight=False)
    return out.getvalue()


class RunReport(BaseModel):
    """What one run of a verb did.

    - ``verb`` and ``inputs``: what was run on which files.
    - ``counts``: every record read, once (:class:`RunCounts`).
    - ``rejections``: each problem of each refused record, with file, line, field and reason
      (the first :data:`~._tally.MAX_REJECTIONS_KEPT`; ``rejections_not_kept`` counts the
      rest, all of which are in the run's ``rejects`` file).
    - ``notes``: what the run showed as it went beyond the rejections: how many were folded.
    - ``summary``: what the verb made of the records it processed (its own type).
    - ``gates``: the gates that failed (``mean score 0.52 is below the minimum 0.99``).
    - ``timings``: seconds, ``total`` and each phase the verb names.
    - ``stopped_by``: ``interrupted`` (Ctrl-C, SIGTERM: ``stop_signal``), ``max_errors``,
      or None when the run read all its input.
    """

    model_config = ConfigDict(frozen=True)

    verb: Verb
    inputs: list[str]
    counts: RunCounts
    rejections: list[RejectedRecord] = Field(default_factory=list)
    rejections_not_kept: int = 0
    notes: list[str] = Field(default_factory=list)
    summary: Summary | None = None
    gates: list[str] = Field(default_factory=list)
    timings: dict[str, float] = Field(default_factory=dict)
    stopped_by: StoppedBy | None = None
    stop_signal: int | None = None

    @classmethod
    def of_tally(
        cls,
        verb: Verb,
        inputs: list[str],
        tally: Tally,
        summary: Summary | None = None,
        *,
        gates: list[str] | None = None,
        timings: dict[str, float] | None = None,
    ) -> RunReport:
        """The report of a run whose tally is ``tally`` (its elapsed time is ``total``)."""
        stopped_by: StoppedBy | None = None
        if tally.interrupted:
            stopped_by = "interrupted"
        elif tally.stopped_early:
            stopped_by = "max_errors"
        return cls(
            verb=verb,
            inputs=inputs,
            counts=RunCounts(
                records_in=tally.records_in,
                processed=tally.processed,
                rejected=tally.rejected,
                not_processed=tally.not_processed,
                outputs=tally.outputs,
                not_runs=tally.not_runs,
            ),
            rejections=[RejectedRecord.of(problem) for problem in tally.problems],
            rejections_not_kept=tally.problems_not_kept,
            notes=tally.folded_lines(),
            summary=summary,
            gates=gates or [],
            timings={**(timings or {}), "total": tally.elapsed},
            stopped_by=stopped_by,
            stop_signal=tally.stop_signal,
        )

    @property
    def interrupted(self) -> bool:
        return self.stopped_by == "interrupted"

    def accounting(self) -> str:
        """``records in: N = processed P + rejected R [+ not processed K (why)]``."""
        counts = self.counts
        return accounting_line(
            counts.records_in,
            counts.processed,
            counts.rejected,
            interrupted=self.interrupted,
            stopped_early=self.stopped_by == "max_errors",
        )

    def exit_code(self) -> int:
        """What ``kp`` exits with: 128 + the signal after a stop by one, 1 when a record was
        refused or a gate failed, else 0."""
        if self.interrupted:
            return exit_status_for(self.stop_signal)
        return EXIT_REJECTED if self.counts.rejected or self.gates else EXIT_OK

    def closing(self) -> list[Any]:
        """What ``kp`` prints at the end, after the notes: the summary's lines and tables (rich
        renderables) with the accounting line."""
        return [self.accounting()] if self.summary is None else list(self.summary.closing(self))

    def gate_lines(self) -> list[str]:
        """``gate failed: ...`` for each failed gate (printed even with ``--quiet``)."""
        return [f"gate failed: {gate}" for gate in self.gates]

    def render(self, width: int = 80) -> str:
        """The report as plain text, as ``kp`` prints it on a file or pipe ``width`` columns
        wide: the notes, :meth:`closing` and :meth:`gate_lines`."""
        return _console_text([*self.notes, *self.closing(), *self.gate_lines()], width)

    def __str__(self) -> str:
        return self.render()
