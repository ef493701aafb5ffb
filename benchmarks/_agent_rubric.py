"""The agent rubric on real conversations: how its outcome agrees with tau-bench's reward.

tau-bench rewards a conversation 1 when the database ends as the task's expected actions leave
it. The agent rubric sees only the trace; its ``successful_completion`` set against the reward,
conversation by conversation, is the confusion matrix printed here, with the agreement (target
≥ 0.93) and the criteria ranked by failure rate. The importers' fixtures (one per log format)
are graded too, to show what the rubric can determine in each format.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from . import _corpus
from ._figures import Figure, report

FIXTURES = _corpus.ROOT / "tests" / "data" / "importers"
AGREEMENT_TARGET = 0.93


def bench_agent_rubric(tau_bench: Path | None = None) -> None:
    """Agreement with the reward on the tau-bench file (default: where the corpus is kept),
    the criteria ranked by failure rate, and what the rubric finds on the format fixtures."""
    path = tau_bench or _corpus.TAU_BENCH
    name = "agent rubric: successful_completion agrees with tau-bench reward"
    if not path.is_file():
        report(Figure(name, None, "", AGREEMENT_TARGET, False, note=f"no file {path}"))
        return
    from knowledgepulse.behaviours import AGENT_RUBRIC
    from knowledgepulse.importers import convert
    from knowledgepulse.rubrics import Case, OutcomeAgreement, ReportBuilder

    records = _corpus.load_tau_bench(path)
    labelled = [trace for record in records for trace in convert("openai", record)]
    # The rubric grades each conversation without its reward: the importer turns the reward
    # into metadata.success, which task_completed reads, so grading it would grade the label.
    blinded = [trace for record in records for trace in convert("openai", without_reward(record))]
    cases = [Case(trace=trace, case_id=trace.id) for trace in blinded]
    agreement = OutcomeAgreement()
    builder = ReportBuilder()
    started = time.perf_counter()
    results = [AGENT_RUBRIC.evaluate(case) for case in cases]
    seconds = time.perf_counter() - started
    for trace, result in zip(labelled, results, strict=True):
        agreement.add(Case(trace=trace, case_id=trace.id), result)
        builder.add(result)
    print(
        f"\nagent rubric on {path.name} ({agreement.count} conversations): "
        "successful_completion (rows) vs reward (columns)"
    )
    print(f"{'':<32} {'reward 1':>9} {'reward 0':>9}")
    print(f"{'successful_completion':<32} {agreement.both:>9} {agreement.rubric_only:>9}")
    print(f"{'other outcome':<32} {agreement.source_only:>9} {agreement.neither:>9}")
    _print_ranked(builder.build())
    report(
        Figure(
            name,
            agreement.agreement,
            "",
            AGREEMENT_TARGET,
            lower_is_better=False,
            note=f"{agreement.both + agreement.neither}/{agreement.count} conversations",
        )
    )
    report(Figure("agent rubric: evaluation per conversation", seconds / len(cases) * 1e3, "ms"))
    _fixtures()


def without_reward(record: dict[str, Any]) -> dict[str, Any]:
    """A tau-bench record without its ``reward``: what the rubric may see of the run."""
    return {key: value for key, value in record.items() if key != "reward"}


def _print_ranked(figures: Any) -> None:
    print(
        f"{'criterion':<24} {'weight':>6} {'failed':>8} {'failure rate':>13} {'undetermined':>13}"
    )
    for stats in figures.criteria:
        determined = stats.passed + stats.failed
        rate = f"{stats.failed / determined:.1%}" if determined else "-"
        print(
            f"{stats.name:<24} {stats.weight:>6.2f} {f'{stats.failed}/{determined}':>8} "
            f"{rate:>13} {stats.undetermined:>13}"
        )


def _fixtures() -> None:
    """Per format fixture: how many criteria were determined, and which failed."""
    from knowledgepulse.behaviours import AGENT_RUBRIC
    from knowledgepulse.importers import read_traces_from_paths
    from knowledgepulse.rubrics import Case

    if not FIXTURES.is_dir():
        return
    print("\nagent rubric on the importers' fixtures (determined criteria; failed ones)")
    for fixture in sorted(FIXTURES.glob("*.json")):
        if "malformed" in fixture.name:
            continue
        traces = [
            trace
            for conversion in read_traces_from_paths([str(fixture)], "auto")
            for trace in conversion.traces
        ]
        for trace in traces:
            result = AGENT_RUBRIC.evaluate(Case(trace=trace, case_id=trace.id))
            determined = [n for n, ok in result.details.items() if ok is not None]
            failed = result.failed
            print(
                f"  {fixture.name:<28} {len(determined)}/{len(result.details)} determined; "
                f"failed: {', '.join(failed) or 'none'}"
            )
