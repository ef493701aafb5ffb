"""Copy hashing: the MinHash libraries against each other, and the copy facet's speed.

On the 200 tau-bench conversations (their run texts' word 4-shingles, the shingles kp curate
hashes), in one run:

- rensa ``RMinHash`` (Rust) and datasketch ``MinHash`` (numpy), 128 permutations each, over
  the same shingle strings: microseconds per trace for the signature alone, and how closely
  each estimates the true Jaccard similarity of pairs of traces (mean absolute error over the
  pairs of attempts at one task and of copies with 3 % of words replaced);
- :func:`knowledgepulse.copies.copy_facets` as kp curate runs it (tokenising, digest, shingle
  hashes, rensa): traces/s per process, the hashing pass alone.
"""

from __future__ import annotations

import itertools
import random
import re
import time
from typing import Any

import numpy as np

from . import _corpus
from ._figures import Figure, report

PERMUTATIONS = 128


def _shingles(text: str, size: int = 4) -> list[str]:
    from knowledgepulse.copies import normalise

    words = re.findall(r"\w+", normalise(text))
    return [" ".join(words[i : i + size]) for i in range(max(1, len(words) - size + 1))]


def _edited(trace: Any, seed: int) -> Any:
    import knowledgepulse as kp

    rng = random.Random(seed)
    data = trace.to_dict()
    data["id"] += f":copy-{seed}"
    for step in data["steps"]:
        if step.get("content"):
            step["content"] = " ".join(
                f"zz{rng.randrange(10**6)}" if rng.random() < 0.03 else w
                for w in step["content"].split(" ")
            )
    return kp.ReasoningTrace.model_validate(data)


def measure_hashing(repeat: int = 3) -> dict[str, Any]:
    """The figures of the module docstring, as numbers."""
    import datasketch
    import rensa

    import knowledgepulse as kp
    from knowledgepulse.copies import copy_facets, run_text

    traces = [kp.ReasoningTrace.model_validate(t) for t in _corpus.tau_bench_traces()]
    copies = [_edited(t, i) for i, t in enumerate(traces[:50])]
    texts = [run_text(t) for t in traces + copies]
    sets = [_shingles(text) for text in texts]
    encoded = [[s.encode() for s in shingles] for shingles in sets]

    def with_rensa() -> list[np.ndarray]:
        out = []
        for shingles in sets:
            minhash = rensa.RMinHash(PERMUTATIONS, 42)
            minhash.update(shingles)
            out.append(np.asarray(minhash.digest(), dtype=np.uint64))
        return out

    def with_datasketch() -> list[np.ndarray]:
        out = []
        for shingles in encoded:
            minhash = datasketch.MinHash(num_perm=PERMUTATIONS, seed=42)
            minhash.update_batch(shingles)
            out.append(np.asarray(minhash.hashvalues, dtype=np.uint64))
        return out

    results: dict[str, Any] = {"traces": len(sets)}
    for name, function in (("rensa", with_rensa), ("datasketch", with_datasketch)):
        best, signatures = float("inf"), []
        for _ in range(repeat):
            started = time.perf_counter()
            signatures = function()
            best = min(best, time.perf_counter() - started)
        # Pairs: attempts at one task (4 per task) and each copy with its source.
        pairs = [
            (a, b)
            for task in range(0, 200, 4)
            for a, b in itertools.combinations(range(task, task + 4), 2)
        ] + [(200 + i, i) for i in range(len(copies))]
        errors = []
        for a, b in pairs:
            truth = len(set(sets[a]) & set(sets[b])) / len(set(sets[a]) | set(sets[b]))
            errors.append(abs(float(np.mean(signatures[a] == signatures[b])) - truth))
        results[name] = {"us_per_trace": best / len(sets) * 1e6, "mae": float(np.mean(errors))}
    facet_texts = traces * 5
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        copy_facets(facet_texts)
        best = min(best, time.perf_counter() - started)
    results["facets_per_s"] = len(facet_texts) / best
    return results


def bench_copy_hashing() -> None:
    found = measure_hashing()
    for name in ("rensa", "datasketch"):
        report(
            Figure(
                f"copies: MinHash signature, {name} (128 perms, per trace)",
                found[name]["us_per_trace"],
                "µs",
                note=f"mean |estimate - Jaccard| {found[name]['mae']:.3f} over "
                "same-task and copy pairs",
            )
        )
    ratio = found["datasketch"]["us_per_trace"] / found["rensa"]["us_per_trace"]
    report(Figure("copies: datasketch time / rensa time", ratio, "x", 1.0, lower_is_better=False))
    report(
        Figure(
            "copies: copy facets (kp curate's hashing pass), one process",
            found["facets_per_s"],
            "traces/s",
            1300,
            lower_is_better=False,
        )
    )
