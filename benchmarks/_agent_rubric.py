"""The agent rubric on real conversations: how its outcome agrees with tau-bench's reward.

tau-bench rewards a conversation 1 when the database ends as the task's expected actions leave
it. The agent rubric sees only the trace; its ``successful_completion`` set against the reward,
conversation by conversation, is the confusion matrix printed here, with the agreement (target
≥ 0.93) and the criteria ranked by failure rate. For the failed conversations it sets the
result's first failing step against where the run went wrong by construction: the first write
that matches none of the task's expected actions (tau-bench's ``info.task.actions``), in the
conversation's own coordinates (the index of the message in ``traj``). The importers'
fixtures (one per log format) are graded too, to show what the rubric can determine in each
format.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _corpus
from ._figures import Figure, report

FIXTURES = _corpus.ROOT / "tests" / "data" / "importers"
AGREEMENT_TARGET = 0.93
WITHIN = 3


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
    _print_located(records, results)
    report(Figure("agent rubric: evaluation per conversation", seconds / len(cases) * 1e3, "ms"))
    _print_without_ground_truth(records)
    _fixtures()


@dataclass
class Located:
    """Where the failed conversations went wrong, by construction and by the rubric."""

    failed: int = 0
    #: failed conversations with a write that matches no expected action (construction truth)
    wrong_write: int = 0
    exact: int = 0
    near: int = 0
    #: the other failed conversations (expected writes left out), and how many got a step
    omitted: int = 0
    omitted_located: int = 0


def first_wrong_write(record: dict[str, Any]) -> int | None:
    """The index in ``traj`` of the first assistant message whose tool call is a write (not a
    read-only tool by :data:`~knowledgepulse.behaviours.DEFAULT_READ_ONLY_TOOLS`) that the tool
    did not refuse (its answer does not start with ``Error``) and that equals none of the
    task's expected actions by name and arguments (canonical JSON): where the run went wrong
    by construction. Read from the record itself, not through the importer."""
    from knowledgepulse.behaviours import DEFAULT_READ_ONLY_TOOLS, is_read_only
    from knowledgepulse.behaviours._facts import canonical_arguments

    task = (record.get("info") or {}).get("task") or {}
    expected = {
        (action.get("name"), canonical_arguments(action.get("kwargs") or {}))
        for action in task.get("actions") or []
    }
    traj = record.get("traj") or []

    def answer(index: int, call_id: Any) -> str:
        # The first tool message after the call with its id: tau-bench reuses ids now and then.
        for later in traj[index + 1 :]:
            if later.get("role") == "tool" and later.get("tool_call_id") == call_id:
                return str(later.get("content") or "")
        return ""

    for index, message in enumerate(traj):
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            name = function.get("name") or ""
            if is_read_only(name, DEFAULT_READ_ONLY_TOOLS):
                continue
            if answer(index, call.get("id")).lstrip().startswith("Error"):
                continue
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except json.JSONDecodeError:
                arguments = function.get("arguments")
            if (name, canonical_arguments(arguments)) not in expected:
                return index
    return None


def located(records: list[dict[str, Any]], results: list[Any]) -> Located:
    """The rubric's first failing step (mapped to its message in ``traj``) against
    :func:`first_wrong_write`, over the conversations the reward calls failed: the message is
    the result's ``first_failing_origin``, as a user reads it off their file."""
    found = Located()
    for record, result in zip(records, results, strict=True):
        if record.get("reward", 0) >= 1:
            continue
        found.failed += 1
        truth = first_wrong_write(record)
        step = result.first_failing_step
        if truth is None:
            found.omitted += 1
            found.omitted_located += step is not None
            continue
        found.wrong_write += 1
        origin = result.first_failing_origin or {}
        at = origin.get("message") if step is not None else None
        found.exact += at == truth
        found.near += at is not None and abs(at - truth) <= WITHIN
    return found


def _print_located(records: list[dict[str, Any]], results: list[Any]) -> None:
    found = located(records, results)
    print(
        f"first failing step on the {found.failed} failed conversations: where a write matching "
        f"no expected action was made ({found.wrong_write} conversations): exact "
        f"{found.exact}/{found.wrong_write}, within {WITHIN} {found.near}/{found.wrong_write}; "
        f"expected writes left out ({found.omitted}): a step named in "
        f"{found.omitted_located}/{found.omitted}"
    )
    if found.wrong_write:
        report(
            Figure(
                "agent rubric: first failing step is the first wrong write (tau-bench failed)",
                found.exact / found.wrong_write,
                "",
                None,
                lower_is_better=False,
                note=f"{found.exact}/{found.wrong_write} conversations, within {WITHIN}: "
                f"{found.near}/{found.wrong_write}",
            )
        )


def without_ground_truth(record: dict[str, Any]) -> dict[str, Any]:
    """A tau-bench record without its reward and its ``info`` (the task's expected actions
    and outputs): what a log without ground truth gives the rubric."""
    return {key: value for key, value in record.items() if key not in ("reward", "info")}


def _print_without_ground_truth(records: list[dict[str, Any]]) -> None:
    """The outcome once the expected actions are hidden too: what ``task_completed`` reads
    from the trace alone, by reward."""
    from collections import Counter

    from knowledgepulse.behaviours import AGENT_RUBRIC
    from knowledgepulse.importers import convert
    from knowledgepulse.rubrics import Case

    outcomes: Counter[tuple[bool, str]] = Counter()
    for record in records:
        for trace in convert("openai", without_ground_truth(record)):
            result = AGENT_RUBRIC.evaluate(Case(trace=trace, case_id=trace.id))
            outcomes[(record.get("reward", 0) >= 1, str(result.outcome_type))] += 1
    for rewarded in (True, False):
        total = sum(count for (r, _), count in outcomes.items() if r == rewarded)
        shown = ", ".join(
            f"{outcome} {count}"
            for (r, outcome), count in sorted(outcomes.items(), key=lambda item: -item[1])
            if r == rewarded
        )
        print(
            f"without expected actions (info hidden), rewarded {int(rewarded)} ({total}): {shown}"
        )


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
