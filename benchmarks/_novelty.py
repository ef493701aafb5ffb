"""Novelty against task truth: does it tell the first attempt at a task from a repeat?

On the bundled tau-bench airline conversations (50 tasks × 4 attempts), each conversation is
scored by a :class:`~knowledgepulse.Scorer` against everything scored before it, in file order
and in 5 shuffled orders (seeds 1–5). Truth: a conversation is a *first attempt* when no
attempt at its task came before it in that order, a *repeat* otherwise (the very first
conversation of an order meets an empty memory and is left out). Reported for the task
novelty (the default) and the seed's whole-trace novelty (``--novelty seed``), side by side in
the same run: the AUC of first attempts over repeats (the chance that a first attempt is
scored more novel than a repeat), the medians, and what share of each passes the README's
gate (value ≥ 0.6) and a novelty of 0.5.

Each trace's vectors are made once per novelty by the automatic embedder and handed back by
text (the orders only change what was seen before). Then ``kp score`` itself, in a child
process, on the same realistic traces with each novelty: traces/s and peak RSS.
"""

from __future__ import annotations

import random
import statistics
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from . import _corpus
from ._figures import Figure, report

ORDERS = (None, 1, 2, 3, 4, 5)
GATE = 0.6


class _ByText:
    """An embedder that answers from vectors made once (one per distinct text)."""

    def __init__(self, table: dict[str, np.ndarray], name: str, dimensions: int) -> None:
        self._table = table
        self.name = name
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._table[text] for text in texts]).astype(np.float32)


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float:
    """P(a positive scores above a negative), ties counting half."""
    pos = np.asarray(positives, dtype=np.float64)[:, None]
    neg = np.asarray(negatives, dtype=np.float64)[None, :]
    return float((pos > neg).mean() + 0.5 * (pos == neg).mean())


def order_figures(
    traces: Sequence[Any], tasks: Sequence[Any], novelty: str, embedder: Any
) -> dict[str, list[float]]:
    """AUC, medians and gate shares of one novelty over every order."""
    import knowledgepulse as kp

    rows = []
    for seed in ORDERS:
        order = list(range(len(traces)))
        if seed is not None:
            random.Random(seed).shuffle(order)
        scorer = kp.Scorer(embedder=embedder, novelty=novelty)  # type: ignore[arg-type]
        scores = scorer.score_many([traces[i] for i in order])
        seen: set[Any] = set()
        first: list[Any] = []
        repeat: list[Any] = []
        for position, (i, score) in enumerate(zip(order, scores)):
            if position:
                (repeat if tasks[i] in seen else first).append(score)
            seen.add(tasks[i])
        rows.append(
            {
                "auc": auc([s.novelty for s in first], [s.novelty for s in repeat]),
                "first": statistics.median(s.novelty for s in first),
                "repeat": statistics.median(s.novelty for s in repeat),
                "first_gate": sum(s.value >= GATE for s in first) / len(first),
                "repeat_gate": sum(s.value >= GATE for s in repeat) / len(repeat),
                "first_half": sum(s.novelty >= 0.5 for s in first) / len(first),
                "repeat_half": sum(s.novelty >= 0.5 for s in repeat) / len(repeat),
            }
        )
    return {key: [row[key] for row in rows] for key in rows[0]}


def bench_novelty(quick: bool, tau_bench: Path | None = None) -> None:
    from knowledgepulse.embedding import select_embedder
    from knowledgepulse.importers import convert
    from knowledgepulse.scoring._scorer import novelty_text

    path = tau_bench or _corpus.TAU_BENCH
    try:
        embedder = select_embedder("auto", bulk=True)
    except Exception as exc:  # no embedder installed: nothing to measure
        report(Figure("novelty AUC first attempt vs repeat", None, "", note=str(exc)))
        return
    if embedder is None:
        report(Figure("novelty AUC first attempt vs repeat", None, "", note="no embedder"))
        return
    if not path.is_file():
        report(Figure("novelty AUC first attempt vs repeat", None, "", note=str(path)))
        return
    traces, tasks = [], []
    for record in _corpus.load_tau_bench(path):
        for trace in convert("openai", record):
            traces.append(trace)
            tasks.append((trace.metadata.model_extra or {})["kp_import"]["task"])
    if quick:
        traces, tasks = traces[:80], tasks[:80]
    novelties: tuple[Literal["task", "seed"], ...] = ("task", "seed")
    for novelty in novelties:
        texts = sorted({novelty_text(t, novelty) for t in traces})
        vectors = np.concatenate(
            [np.asarray(embedder.embed(texts[i : i + 32])) for i in range(0, len(texts), 32)]
        )
        table = dict(zip(texts, vectors))
        figures = order_figures(
            traces, tasks, novelty, _ByText(table, embedder.name, vectors.shape[1])
        )
        label = "task (default)" if novelty == "task" else "seed (--novelty seed)"
        spread = f"file order {figures['auc'][0]:.3f}, mean {statistics.mean(figures['auc']):.3f}"
        report(
            Figure(
                f"novelty {label}: AUC first vs repeat, worst of 6 orders",
                min(figures["auc"]),
                "",
                0.95 if novelty == "task" else None,
                lower_is_better=False,
                note=spread,
            )
        )
        report(
            Figure(
                f"novelty {label}: median of first attempts, lowest",
                min(figures["first"]),
                "",
                0.5 if novelty == "task" else None,
                lower_is_better=False,
                note=f"range {min(figures['first']):.3f}–{max(figures['first']):.3f}",
            )
        )
        report(
            Figure(
                f"novelty {label}: median of repeats, highest",
                max(figures["repeat"]),
                "",
                0.15 if novelty == "task" else None,
                note=f"range {min(figures['repeat']):.3f}–{max(figures['repeat']):.3f}",
            )
        )
        report(
            Figure(
                f"novelty {label}: first attempts passing value ≥ {GATE}",
                statistics.mean(figures["first_gate"]),
                "share",
                note=f"repeats {statistics.mean(figures['repeat_gate']):.3f}; novelty ≥ 0.5: "
                f"first {statistics.mean(figures['first_half']):.3f}, repeats "
                f"{statistics.mean(figures['repeat_half']):.3f} (mean of 6 orders)",
            )
        )
    _score_speed(quick)


def _score_speed(quick: bool) -> None:
    """kp score with the embedder, task novelty against the seed's, same traces, same run."""
    from .__main__ import run_kp_score

    sizes = {"task": 2_000 if quick else 10_000, "seed": 300 if quick else 1_000}
    rates = {}
    with tempfile.TemporaryDirectory() as tmp:
        for novelty, size in sizes.items():
            path = _corpus.write_trace_file(Path(tmp) / f"traces-{size}.jsonl.gz", size)
            rate, peak = run_kp_score(path, size, embed=True, extra=["--novelty", novelty])
            rates[novelty] = (rate, peak, size)
    (task_rate, task_peak, task_n), (seed_rate, seed_peak, seed_n) = rates["task"], rates["seed"]
    report(
        Figure(
            "kp score --novelty task vs seed, realistic traces",
            task_rate / seed_rate,
            "×",
            10.0,
            lower_is_better=False,
            note=f"{task_rate:,.0f} traces/s ({task_n:,}, peak {task_peak:.0f} MiB) vs "
            f"{seed_rate:,.1f} traces/s ({seed_n:,}, peak {seed_peak:.0f} MiB)",
        )
    )
    report(Figure("kp score --novelty task: peak RSS", task_peak, "MiB", 1024.0))
