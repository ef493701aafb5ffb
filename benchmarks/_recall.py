"""Recall's figures: how often it finds an attempt at the same task, and how fast it answers.

- Quality on the tau-bench conversations (50 airline tasks x 4 attempts): each conversation's
  first user message (its objective) is the query, the other 199 the base; then each
  conversation's whole task text. The base stores each trace with its task-text vector as a
  Scorer stores it (``knowledgepulse.tasks.task_text``, all-MiniLM-L6-v2, unit length), and
  the full-text index holds its task text. Recall@1 / recall@5 of a same-task attempt for the vector search
  alone, the full-text search alone (SQLite FTS5, bm25) and their reciprocal-rank fusion, each
  ranking taken without the query's own conversation.
- Latency of one ``search_similar`` call (the query embedded, both searches, the fusion, the
  hits read and rendered) on a base of ``size`` synthetic traces: each objective a sentence of
  8 to 20 words drawn from the tau-bench task texts' words (by their frequency there), each
  vector a clustered unit vector (as the knowledge-base figures use).

    python -m benchmarks._recall [path/to/gpt-4o-airline.json] [--traces N] [--base PATH] [--quick]
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from . import _corpus
from ._figures import Figure, report

#: The rankings measured: the vector search by task text alone, the vector ranking recall
#: uses (each candidate by the nearer of its task-text and opening vectors), the full-text
#: search, the fusion recall used before openings, and recall's fusion.
RANKINGS = (
    "vector",
    "vector, nearer of task text and opening",
    "text",
    "fused before (task-text vector + text)",
    "fused",
)
#: Traces in the latency base.
DEFAULT_SIZE = {False: 100_000, True: 10_000}
CALLS = {False: 300, True: 50}


def bench_recall(
    quick: bool, tau_path: Path | None = None, size: int | None = None, base: Path | None = None
) -> None:
    from knowledgepulse.embedding import choose_embedder

    path = tau_path or _corpus.TAU_BENCH
    embedder = choose_embedder("auto").embedder
    if embedder is None or not path.is_file():
        report(
            Figure("recall figures", None, "", note="embedder or tau-bench corpus not installed")
        )
        return
    from ._mcp import tau_bench

    traces, tasks = tau_bench(path)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        words = _quality(Path(folder) / "tau.sqlite", embedder, traces, tasks)
        measured = time.perf_counter()
        _latency(base or Path(folder) / "large.sqlite", embedder, traces, words,
                 size or DEFAULT_SIZE[quick], CALLS[quick])  # fmt: skip
        print(
            f"  (recall group: quality in {measured - start:.0f} s, latency base built and "
            f"searched in {time.perf_counter() - measured:.0f} s)",
            flush=True,
        )


def _unit(rows: np.ndarray) -> np.ndarray:
    unit: np.ndarray = rows / np.maximum(np.linalg.norm(rows, axis=-1, keepdims=True), 1e-12)
    return unit.astype(np.float32)


def _quality(base: Path, embedder: Any, traces: list[Any], tasks: dict[str, int]) -> Counter[str]:
    from knowledgepulse.kb import EmbeddingIdentity, StoredTrace, open_knowledge_base
    from knowledgepulse.kb._fulltext import query_terms
    from knowledgepulse.kb._recall import fused_order, fused_rankings, nearer_facet
    from knowledgepulse.tasks import task_text

    texts = [task_text(trace).text for trace in traces]
    # The base holds what a Scorer stores: unit vectors of the task texts, as they come.
    vectors = _unit(np.asarray(embedder.embed(texts), dtype=np.float32))
    found: dict[str, dict[str, list[int]]] = {}
    with open_knowledge_base(base, EmbeddingIdentity.of(embedder)) as kb:
        kb.add_many(
            [
                StoredTrace(id=trace.id, trace=trace.to_dict(),
                            vector=vector)
                for trace, vector in zip(traces, vectors)
            ]
        )  # fmt: skip
        # The query (the first user message, which often does not say which task:
        # "I'd like to change my flight"), and a whole task text (what a finished run asks).
        for kind, queries in (
            ("first user message", [trace.task.objective for trace in traces]),
            ("task text", texts),
        ):
            rows = _unit(np.asarray(embedder.embed(queries), dtype=np.float32))
            counts = found[kind] = {name: [0, 0] for name in RANKINGS}
            for trace, query, row in zip(traces, queries, rows):
                hits = [(h.id, h.similarity) for h in kb.search(row, 51) if h.id != trace.id]
                by_vector = [trace_id for trace_id, _ in hits[:50]]
                terms = query_terms(query)
                by_text = [i for i, _ in kb.search_text(terms, 51) if i != trace.id][:50]
                by_facet = [i for i, _ in nearer_facet(kb, embedder, row, hits[:50], by_text, 50)]
                for name, ranking in (
                    ("vector", by_vector),
                    ("vector, nearer of task text and opening", by_facet),
                    ("text", by_text),
                    ("fused before (task-text vector + text)", fused_order(
                        fused_rankings(by_vector, by_text))),
                    ("fused", fused_order(fused_rankings(by_facet, by_text))),
                ):  # fmt: skip
                    same = [tasks[other] == tasks[trace.id] for other in ranking[:5]]
                    counts[name][0] += bool(same and same[0])
                    counts[name][1] += any(same)
    for kind, counts in found.items():
        note = f"{len(traces)} conversations, query = {kind}, {embedder.name}"
        for name, (top1, top5) in counts.items():
            for label, count, target in (("@1", top1, 0.80), ("@5", top5, 0.95)):
                report(
                    Figure(
                        f"recall{label}: same-task attempt, {name}, query {kind}",
                        count / len(traces),
                        "",
                        target if name == "fused" and kind == "first user message" else None,
                        lower_is_better=False,
                        note=note,
                    )
                )
    return Counter(w for text in texts for w in re.findall(r"[A-Za-z0-9]+", text.lower()))


def _latency(
    base: Path, embedder: Any, traces: list[Any], words: Counter[str], size: int, calls: int
) -> None:
    from knowledgepulse.kb import EmbeddingIdentity, StoredTrace, open_knowledge_base
    from knowledgepulse.kb._recall import search_similar

    from ._kb import clustered_vectors

    rng = np.random.default_rng(7)
    vocabulary = list(words)
    weights = np.asarray([words[w] for w in vocabulary], dtype=np.float64)
    weights /= weights.sum()
    vectors = clustered_vectors(size, seed=5)
    built = time.perf_counter()
    with open_knowledge_base(base, EmbeddingIdentity.of(embedder)) as kb:
        # A base kept from an earlier run (--base) is searched as it is.
        for start in range(len(kb), size, 5000):
            rows = []
            for i, vector in enumerate(vectors[start : start + 5000], start=start):
                picked = rng.choice(len(vocabulary), int(rng.integers(8, 21)), p=weights)
                objective = " ".join(vocabulary[j] for j in picked)
                rows.append(StoredTrace(id=f"kp:trace:synthetic:{i}", trace=_synthetic(i, objective),
                                        vector=vector))  # fmt: skip
            kb.add_many(rows)
        size = len(kb)
        # A base kept from a run before openings existed gets them now, as recall would make
        # them when it meets each trace (outside the timed calls).
        ids = [f"kp:trace:synthetic:{i}" for i in range(size)]
        for start in range(0, len(ids), 5000):
            kb.opening_vectors(ids[start : start + 5000], embedder)
        for query in [trace.task.objective for trace in traces][:5]:
            # Warm-up: the vectors are read, the ANN index built or loaded, the model loaded.
            search_similar(kb, embedder, query)
        built = time.perf_counter() - built
        queries = [trace.task.objective for trace in traces]
        seconds = []
        for number in range(calls):
            start_s = time.perf_counter()
            search_similar(kb, embedder, queries[number % len(queries)], k=5)
            seconds.append(time.perf_counter() - start_s)
        kind = kb.stats().index
    ms = np.asarray(seconds) * 1e3
    note = (
        f"{size:,} synthetic traces ({kind} vector index; base built or opened, and its index "
        f"built or loaded, in {built:.0f} s), {calls} "
        "calls of search_similar (k 5, success only), the query embedded in each"
    )
    report(Figure("recall search p50", float(np.percentile(ms, 50)), "ms", None, note=note))
    report(Figure("recall search p99", float(np.percentile(ms, 99)), "ms", 50,
                  note=f"mean {statistics.mean(seconds) * 1e3:.1f} ms"))  # fmt: skip


def _synthetic(number: int, objective: str) -> dict[str, Any]:
    return {
        "@context": "https://openknowledgepulse.org/schema/v1",
        "@type": "ReasoningTrace",
        "id": f"kp:trace:synthetic:{number}",
        "task": {"objective": objective},
        "metadata": {
            "created_at": "2026-01-01T00:00:00Z",
            "task_domain": "bench",
            "success": number % 4 != 0,
            "visibility": "network",
            "privacy_level": "aggregated",
        },
        "steps": [{"step_id": 0, "type": "thought", "content": "synthetic"}],
        "outcome": {"result_summary": "synthetic", "confidence": 0.5},
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._recall", description=__doc__)
    parser.add_argument("path", nargs="?", type=Path, help="tau-bench gpt-4o-airline.json")
    parser.add_argument(
        "--traces", type=int, help=f"latency base size (default {DEFAULT_SIZE[False]:,})"
    )
    parser.add_argument(
        "--base",
        type=Path,
        help="the latency base: kept there, and reused by a later run (building 10^5 traces "
        "and their HNSW graph took ~14 min on 2 busy cores)",
    )
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    bench_recall(args.quick, args.path, args.traces, args.base)


if __name__ == "__main__":
    main()
