"""kp diff: what it finds on tau-bench's attempts, and how fast it is on large inputs.

On the tau-bench file (50 tasks × 4 attempts): every pair of attempts at one task should name
its first parting step, and every pair where one attempt was rewarded 1 and the other 0 should
show a criterion of the agent rubric that flipped, with the steps it is about. Speed: two
500-step traces compared (alignment and the agent rubric on both) under 200 ms; two 10^4-case
``kp eval`` files read and compared under 2 s.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from collections import defaultdict
from itertools import combinations
from pathlib import Path
from typing import Any

from . import _corpus
from ._figures import Figure, report, timed

TRACE_TARGET_MS = 200.0
EVAL_TARGET_S = 2.0


def bench_compare(quick: bool, tau_bench: Path | None = None) -> None:
    _tau_bench(tau_bench or _corpus.TAU_BENCH, quick)
    _long_traces()
    _evaluation_files(2_000 if quick else 10_000)


def _tau_bench(path: Path, quick: bool) -> None:
    from knowledgepulse.compare import compare_traces
    from knowledgepulse.importers import convert

    if not path.is_file():
        report(Figure("kp diff: tau-bench pairs naming a parting step", None, "", note=str(path)))
        return
    by_task: dict[Any, list[Any]] = defaultdict(list)
    for record in _corpus.load_tau_bench(path):
        for trace in convert("openai", record):
            by_task[(trace.metadata.model_extra or {})["kp_import"]["task"]].append(trace)
    tasks = sorted(by_task)[: 10 if quick else None]
    pairs = parted = mixed = shown = with_steps = 0
    started = time.perf_counter()
    for task in tasks:
        for a, b in combinations(by_task[task], 2):
            comparison = compare_traces(a, b, rubric=True)
            pairs += 1
            parted += comparison.parting is not None
            if a.metadata.success != b.metadata.success:
                mixed += 1
                shown += bool(comparison.flipped)
                with_steps += any(f.steps_a or f.steps_b for f in comparison.flipped)
    seconds = time.perf_counter() - started
    report(
        Figure(
            "kp diff: tau-bench attempt pairs naming a parting step",
            parted / pairs,
            "",
            1.0,
            lower_is_better=False,
            note=f"{parted}/{pairs} pairs of {len(tasks)} tasks",
        )
    )
    report(
        Figure(
            "kp diff: passed/failed pairs with a flipped criterion",
            shown / mixed if mixed else None,
            "",
            1.0,
            lower_is_better=False,
            note=f"{shown}/{mixed} pairs",
        )
    )
    report(
        Figure(
            "kp diff: passed/failed pairs with a flip naming steps",
            with_steps / mixed if mixed else None,
            "",
            1.0,
            lower_is_better=False,
            note=f"{with_steps}/{mixed} pairs",
        )
    )
    report(Figure("kp diff: tau-bench pair with the agent rubric", seconds / pairs * 1e3, "ms"))


def _long_trace(seed: int, trace_id: str, *, steps: int = 500) -> Any:
    """A support conversation of ``steps`` steps: user turn, thought, call, result, repeated."""
    from knowledgepulse import ReasoningTrace

    rng = random.Random(seed)
    rows: list[dict[str, Any]] = []
    while len(rows) < steps:
        n = len(rows)
        order = rng.randrange(1000) if seed else n // 4
        rows += [
            {"type": "observation", "content": f"user asks about order {order}", "source": "user"},
            {"type": "thought", "content": f"look up order {order} and its items"},
            {"type": "tool_call", "tool": {"name": "get_order"}, "input": {"id": order}},
            {"type": "observation", "content": f"order {order}: 2 items, shipped"},
        ]
    data = {
        "@context": "https://openknowledgepulse.org/schema/v1",
        "@type": "ReasoningTrace",
        "id": trace_id,
        "metadata": {
            "created_at": "2026-01-01T00:00:00Z",
            "task_domain": "support",
            "success": True,
            "visibility": "private",
            "privacy_level": "private",
        },
        "task": {"objective": "Answer questions about orders"},
        "steps": [{"step_id": i, **row} for i, row in enumerate(rows[:steps])],
        "outcome": {"result_summary": "answered", "confidence": 0.9},
    }
    return ReasoningTrace.model_validate(data)


def _long_traces() -> None:
    from knowledgepulse.compare import compare_traces

    a = _long_trace(0, "kp:trace:long-a")
    # B: the same run with a call's arguments changed at step 102, four steps inserted at 250
    # and eight dropped near the end: the alignment has prefix, middle and suffix to do.
    data = a.to_dict()
    steps = data["steps"]
    steps[102]["input"] = {"id": 9999}
    inserted = [dict(step) for step in steps[240:244]]
    steps = steps[:250] + inserted + steps[250:400] + steps[408:]
    data["steps"] = [{**step, "step_id": i} for i, step in enumerate(steps)]
    data["id"] = "kp:trace:long-b"
    b = type(a).model_validate(data)
    unrelated = _long_trace(7, "kp:trace:long-c")
    for label, other in (("similar", b), ("unrelated", unrelated)):
        for rubric in (None, True):
            best = min(timed(lambda: compare_traces(a, other, rubric=rubric), 5))  # noqa: B023
            name = f"kp diff: two 500-step traces, {label}" + (", agent rubric" if rubric else "")
            report(Figure(name, best * 1e3, "ms", TRACE_TARGET_MS))
    # The worst case of the alignment: no tool call to anchor on, no message in common, so
    # the longest common subsequence runs over all 500 x 500 messages.
    chat_a, chat_b = (_messages_only(trace, seed) for seed, trace in ((1, a), (2, unrelated)))
    best = min(timed(lambda: compare_traces(chat_a, chat_b), 5))
    report(Figure("kp diff: two 500-message traces, no call in common", best * 1e3, "ms", 200))


def _messages_only(trace: Any, seed: int) -> Any:
    rng = random.Random(seed)
    data = trace.to_dict()
    data["steps"] = [
        {"step_id": i, "type": "thought", "content": f"note {rng.randrange(10**9)}"}
        for i in range(len(data["steps"]))
    ]
    return type(trace).model_validate(data)


def _eval_line(case: int, rng: random.Random) -> dict[str, Any]:
    names = ("expected_actions", "no_loops", "errors_recovered", "known_tools", "answered")
    details = {name: rng.random() < 0.8 for name in names}
    weights = dict.fromkeys(names, 0.2)
    score = round(sum(0.2 for ok in details.values() if ok), 12)
    outcome = (
        "successful_completion"
        if score >= 0.75
        else "graceful_failure"
        if score >= 0.5
        else "partial_failure"
        if score > 0
        else "hard_failure"
    )
    return {
        "schema": "knowledgepulse.eval/1",
        "rubric": "agent",
        "case_id": f"case-{case}",
        "score": score,
        "details": details,
        "weights": weights,
        "outcome_type": outcome,
        "explanation": f"Score {score:.2f} ({outcome}).",
        "source": "cases.jsonl",
        "line": case + 1,
    }


def _evaluation_files(cases: int) -> None:
    from knowledgepulse.compare import compare_evaluations, load_results

    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for seed in (1, 2):
            rng = random.Random(seed)
            path = Path(folder) / f"run-{seed}.jsonl"
            path.write_text(
                "".join(json.dumps(_eval_line(i, rng)) + "\n" for i in range(cases)),
                encoding="utf-8",
            )
            paths.append(str(path))

        def diff() -> Any:
            a, b = load_results(paths[0]), load_results(paths[1])
            return compare_evaluations(a.records, b.records, names=(paths[0], paths[1]))

        best = min(timed(diff, 3))
    report(
        Figure(
            f"kp diff: two {cases:,}-case eval files, read and compared",
            best,
            "s",
            EVAL_TARGET_S if cases >= 10_000 else None,
        )
    )
