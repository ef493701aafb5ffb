"""ANN figures: recall@1 and latency of the knowledge base's HNSW index (usearch) against the
exact answer, per data kind and size, with its build time and memory.

Data kinds (unit vectors; queries are 500 vectors of the same kind held out of the index, as a
new trace is to a base):

- ``uniform``: Gaussian vectors normalised (384 d): no structure, the hardest case for a graph;
- ``clustered``: around n/500 centres with noise (384 d), as benchmarks/_kb.py's;
- ``traces``: static-embedder vectors (256 d, the first-pass model of ``kp curate``) of the
  tau-bench conversations edited as a pile would hold them: 1-5 % of each conversation's tokens
  replaced by tokens of the corpus, a stretch dropped from a third of them.

``python -m benchmarks ann --sizes 200000,1000000`` measures the shipped index
(:class:`knowledgepulse.kb._index.VectorIndex`); ``python -m benchmarks._ann_sweep`` sweeps the
raw usearch settings on one size (the table behind the shipped ones, docs/performance.md).
"""

from __future__ import annotations

import argparse
import os
import resource
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from ._figures import Figure, report

Floats = npt.NDArray[np.float32]
KINDS = ("uniform", "clustered", "traces")
QUERIES = 500
DIMS = 384
#: A neighbour this much less similar than the true nearest counts as "close": the novelty
#: score computed against it is off by at most this.
CLOSE = 1e-3


def _unit(rows: npt.NDArray[Any]) -> Floats:
    rows = rows.astype(np.float32, copy=False)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def uniform(n: int, seed: int = 0) -> Floats:
    rng = np.random.default_rng(seed)
    out = np.empty((n, DIMS), np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        out[start:stop] = _unit(rng.standard_normal((stop - start, DIMS), dtype=np.float32))
    return out


def clustered(n: int, seed: int = 0) -> Floats:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(1000, n // 500), DIMS), dtype=np.float32)
    out = np.empty((n, DIMS), np.float32)
    for start in range(0, n, 100_000):
        stop = min(n, start + 100_000)
        rows = centres[rng.integers(0, len(centres), stop - start)]
        rows = rows + 0.6 * rng.standard_normal(rows.shape, dtype=np.float32)
        out[start:stop] = _unit(rows)
    return out


def traces(n: int, seed: int = 0) -> Floats:
    """Static vectors of ``n`` edited tau-bench conversations (see the module)."""
    from knowledgepulse.embedding._static import StaticEmbedder

    from . import _corpus

    embedder = StaticEmbedder()
    texts = [
        __import__("knowledgepulse").ReasoningTrace.model_validate(t).embedding_text
        for t in _corpus.tau_bench_traces()
    ]
    base = embedder.token_ids(texts)
    table = embedder.model.table.astype(np.float32)
    pool = np.concatenate(base)
    rng = np.random.default_rng(seed)
    out = np.empty((n, table.shape[1]), np.float32)
    sums = [table[ids].sum(axis=0, dtype=np.float64) for ids in base]
    for row in range(n):
        pick = int(rng.integers(0, len(base)))
        ids = base[pick]
        total = sums[pick].copy()
        # Replaced tokens: remove theirs, add the replacements (the same sum as re-embedding).
        replaced = rng.random(len(ids)) < rng.uniform(0.01, 0.05)
        if replaced.any():
            total -= table[ids[replaced]].sum(axis=0, dtype=np.float64)
            total += table[rng.choice(pool, int(replaced.sum()))].sum(axis=0, dtype=np.float64)
        if rng.random() < 1 / 3:  # a step dropped: a stretch of up to a tenth of the tokens
            length = int(rng.integers(1, max(2, len(ids) // 10)))
            start = int(rng.integers(0, max(1, len(ids) - length)))
            total -= table[ids[start : start + length]].sum(axis=0, dtype=np.float64)
        out[row] = total / np.linalg.norm(total)
    return out


def data(kind: str, n: int, seed: int = 0) -> tuple[Floats, Floats]:
    """``n`` stored vectors and :data:`QUERIES` held-out queries of ``kind``."""
    made = {"uniform": uniform, "clustered": clustered, "traces": traces}[kind](n + QUERIES, seed)
    return made[:n], made[n:]


def exact_best(stored: Floats, queries: Floats) -> tuple[npt.NDArray[np.int64], Floats]:
    """The position and similarity of each query's nearest stored vector."""
    best = np.empty(len(queries), np.int64)
    top = np.full(len(queries), -np.inf, np.float32)
    for start in range(0, len(stored), 200_000):
        sims = queries @ stored[start : start + 200_000].T
        arg = sims.argmax(axis=1)
        value = sims[np.arange(len(queries)), arg]
        better = value > top
        best[better] = arg[better] + start
        top[better] = value[better]
    return best, top


def exact_truth(index: Any, queries: Floats) -> tuple[npt.NDArray[np.int64], Floats]:
    """The nearest of each query as the index's exact mode finds it: the same exact similarity
    as the ANN's re-ranking, the older row first on a tie (float32 products alone would count
    rounding ties, 1e-7 apart, as misses)."""
    from knowledgepulse.kb._index import VectorIndex

    exact = VectorIndex(index.dimensions, mode="exact")
    exact.extend(index.ids, index.vectors())
    found = [row[0] for start in range(0, len(queries), 20)
             for row in exact.nearest(queries[start : start + 20], 1)]  # fmt: skip
    return (
        np.asarray([f[0] for f in found], np.int64),
        np.asarray([f[1] for f in found], np.float32),
    )


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return ordered[len(ordered) // 2] * 1e3, ordered[int(len(ordered) * 0.99)] * 1e3


def _load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


# -- the shipped index ------------------------------------------------------------------------


def bench_ann(sizes: list[int], kinds: tuple[str, ...] = KINDS) -> None:
    """recall@1, p50/p99, build time and memory of ``VectorIndex`` per kind and size."""
    try:
        import usearch.index  # noqa: F401  (not before ray.init(): imported here, not at the top)
    except ImportError:
        report(Figure("ANN figures", None, "", note="usearch not installed"))
        return
    from knowledgepulse.kb._index import VectorIndex

    for n in sizes:
        for kind in kinds:
            stored, queries = data(kind, n)
            index = VectorIndex(stored.shape[1], mode="ann")
            index.extend([str(i) for i in range(n)], stored)
            before = _rss_mib()
            started = time.perf_counter()
            index.nearest(queries[:1], 1)  # builds the graph (usearch's threads: every core)
            build = time.perf_counter() - started
            grown = _rss_mib() - before
            samples, cpu, found, sims = [], [], [], []
            for row in queries:
                t, c = time.perf_counter(), time.process_time()
                best = index.nearest(row[None, :], 1)[0][0]
                samples.append(time.perf_counter() - t)
                cpu.append(time.process_time() - c)
                found.append(best[0])
                sims.append(best[1])
            truth, top = exact_truth(index, queries)
            recall = float(np.mean(np.asarray(found) == truth))
            close = float(np.mean(np.asarray(sims) >= top - CLOSE))
            p50, p99 = _percentiles(samples)
            label = f"ANN {kind}, {n:,} vectors ({stored.shape[1]} d)"
            note = (
                f"within {CLOSE} of the best: {close:.3f}; build {build:.0f} s, "
                f"+{grown:.0f} MiB RSS, {_load()}"
            )
            report(Figure(f"{label}: recall@1", recall, "", 0.99, False, note=note))
            # The CPU time of a query does not grow with the other processes on the cores, as
            # its wall time does: both are shown.
            report(
                Figure(
                    f"  p50 (p99 {p99:.2f} ms)",
                    p50,
                    "ms",
                    1,
                    note=f"CPU time p50 {_percentiles(cpu)[0]:.2f} ms",
                )
            )
            del index, stored


# -- the sweep behind the settings ------------------------------------------------------------


def sweep(
    kind: str,
    n: int,
    builds: list[tuple[str, int, int]],
    expansions: list[int],
    candidates: list[int],
) -> None:
    """Raw usearch: each (dtype, connectivity, expansion_add) built once, then searched at
    each expansion_search with each count of candidates re-ranked exactly."""
    from usearch.index import Index

    stored, queries = data(kind, n)
    truth, top = exact_best(stored, queries)
    print(f"{kind} {n:,} ({stored.shape[1]} d), {_load()}", flush=True)
    for dtype, connectivity, expansion_add in builds:
        index = Index(
            ndim=stored.shape[1],
            metric="ip",
            dtype=dtype,
            connectivity=connectivity,
            expansion_add=expansion_add,
        )
        started = time.perf_counter()
        index.add(np.arange(n, dtype=np.uint64), stored, threads=0)
        build = time.perf_counter() - started
        for expansion in expansions:
            index.expansion_search = expansion  # type: ignore[misc]  # settable at run time
            for count in candidates:
                samples, cpu, found, sims = [], [], [], []
                for row in queries:
                    t, c = time.perf_counter(), time.process_time()
                    keys = index.search(row, count).keys.astype(np.int64)
                    exact = stored[keys] @ row
                    found.append(int(keys[np.argmax(exact)]))
                    samples.append(time.perf_counter() - t)
                    cpu.append(time.process_time() - c)
                    sims.append(float(exact.max()))
                p50, p99 = _percentiles(samples)
                recall = float(np.mean(np.asarray(found) == truth))
                close = float(np.mean(np.asarray(sims) >= top - CLOSE))
                print(
                    f"{dtype} M={connectivity} efC={expansion_add} build={build:.0f}s "
                    f"mem={index.memory_usage / 2**20:.0f}MiB ef={expansion} cand={count}: "
                    f"recall@1 {recall:.3f} close {close:.3f} p50 {p50:.2f} ms p99 {p99:.2f} ms "
                    f"cpu p50 {_percentiles(cpu)[0]:.2f} ms ({_load()})",
                    flush=True,
                )
        del index


def _main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks._ann_sweep")
    parser.add_argument("--kind", choices=KINDS, default="clustered")
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--build", action="append", help="dtype:connectivity:expansion_add")
    parser.add_argument("--ef", default="64,128,256")
    parser.add_argument("--candidates", default="16,64")
    args = parser.parse_args()
    builds = [
        (b.split(":")[0], int(b.split(":")[1]), int(b.split(":")[2]))
        for b in (args.build or ["f16:32:128"])
    ]
    sweep(
        args.kind,
        args.n,
        builds,
        [int(x) for x in args.ef.split(",")],
        [int(x) for x in args.candidates.split(",")],
    )


if __name__ == "__main__":
    _main()
