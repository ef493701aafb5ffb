"""Curation figures: tiered curation (static first pass, MiniLM decides) against MiniLM-only,
on a realistic pile: the 200 tau-bench conversations plus edited copies of some of them.

The pile: every conversation once, and ``copies`` copies of conversations drawn (seeded) from
half of them, each copy edited: 1-5 % of its words replaced by words of other conversations,
one step dropped in a third of the copies, a new id. So some conversations have near-duplicates
(their copies), the other half have none but their own task's other attempts.

Measured, in one run:

- MiniLM (the bulk embedder) over every trace: the reference, and its time;
- the static embedder over every trace: time, tokens/s;
- MiniLM-only curation and tiered curation (``first_pass=static``, the default candidate
  threshold) on the same MiniLM vectors, so that the two differ only by the candidates: pair
  recall (MiniLM near-duplicate pairs that the tiers found), kept-set agreement (traces on
  which the two decisions agree), the traces the tiers had MiniLM embed, and the estimated
  tiered time (static pass + that share of the MiniLM time).
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from . import _corpus


def pile_traces(
    size: int, conversations: int | None = None, seed: int = 11
) -> Iterator[dict[str, Any]]:
    """A pile of ``size`` traces: the tau-bench conversations (the first ``conversations``;
    default all 200), then edited copies of them in turn (:func:`edited_copy`), one at a time."""
    base = _corpus.tau_bench_traces()[:conversations]
    rng = random.Random(seed)
    words = [w for t in base for s in t["steps"] for w in str(s.get("content", "")).split()]
    for i in range(size):
        yield base[i] if i < len(base) else edited_copy(base[i % len(base)], i, rng, words)


def edited_pile(
    copies: int, conversations: int | None = None, seed: int = 11
) -> list[dict[str, Any]]:
    """The tau-bench conversations then ``copies`` edited copies: the first
    ``len(base) + copies`` traces of the pile ``python -m benchmarks curation-scale`` writes."""
    count = len(_corpus.tau_bench_traces()[:conversations]) + copies
    return list(pile_traces(count, conversations, seed))


def edited_copy(
    trace: dict[str, Any], k: int, rng: random.Random, words: list[str]
) -> dict[str, Any]:
    """A copy of ``trace`` with the id suffix ``:copy-k``: 1-5 % of its words replaced by
    ``words`` (drawn with ``rng``), one step dropped in a third of the copies."""
    trace = copy.deepcopy(trace)
    trace["id"] = f"{trace['id']}:copy-{k}"
    rate = rng.uniform(0.01, 0.05)
    for step in trace["steps"]:
        content = step.get("content")
        if isinstance(content, str) and content:
            tokens = content.split(" ")
            for i in range(len(tokens)):
                if rng.random() < rate:
                    tokens[i] = rng.choice(words)
            step["content"] = " ".join(tokens)
    if len(trace["steps"]) > 2 and rng.random() < 1 / 3:
        del trace["steps"][rng.randrange(1, len(trace["steps"]))]
        for i, step in enumerate(trace["steps"]):
            step["step_id"] = i
    return trace


#: How near S a MiniLM cosine counts as at the threshold (see measure()).
NEAR_THRESHOLD = 1e-3

#: Static cosines at which curation decided by the static vectors alone is compared.
STATIC_ONLY_THRESHOLDS = (0.99, 0.995, 0.997, 0.998, 0.999, 0.9995, 0.9998)


class _Vectors:
    """Vectors computed once, handed out by text (as the embedders would compute them)."""

    def __init__(self, texts: list[str], vectors: np.ndarray, name: str) -> None:
        self.rows = {text: i for i, text in enumerate(texts)}
        self.vectors = vectors
        self.dimensions = int(vectors.shape[1])
        self.name = name
        self.embedded = 0

    def embed(self, texts: Any) -> np.ndarray:
        self.embedded += len(texts)
        return self.vectors[[self.rows[t] for t in texts]]


def measure(
    copies: int, similarity: float | None = None, conversations: int | None = None
) -> dict[str, Any]:
    """Tiered against MiniLM-only curation on ``edited_pile(copies)`` (see the module)."""
    import knowledgepulse as kp
    from knowledgepulse.embedding import choose_embedder
    from knowledgepulse.embedding._static import StaticEmbedder
    from knowledgepulse.scoring._curation import DEFAULT_SIMILARITY, candidate_threshold, curate

    similarity = DEFAULT_SIMILARITY if similarity is None else similarity
    traces = [kp.ReasoningTrace.model_validate(t) for t in edited_pile(copies, conversations)]
    texts = [t.embedding_text for t in traces]
    static = StaticEmbedder()
    static.warm_up()
    started = time.perf_counter()
    static_vectors = static.embed(texts)
    static_seconds = time.perf_counter() - started
    tokens = sum(len(ids) for ids in static.token_ids(texts))
    minilm = choose_embedder("auto", bulk=True).embedder
    assert minilm is not None
    minilm.embed(["warm up"])
    started = time.perf_counter()
    minilm_vectors = np.concatenate(
        [minilm.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)]
    )
    minilm_seconds = time.perf_counter() - started

    strong = _Vectors(texts, minilm_vectors, minilm.name)
    cheap = _Vectors(texts, static_vectors, static.name)
    reference = curate(traces, embedder=strong, similarity=similarity)
    strong.embedded = 0
    started = time.perf_counter()
    tiered = curate(traces, embedder=strong, similarity=similarity, first_pass=cheap)
    grouping_seconds = time.perf_counter() - started

    unit = minilm_vectors / np.linalg.norm(minilm_vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -1.0)
    reference_pairs = int((sims >= similarity).sum()) // 2
    # Pairs whose MiniLM cosine is within NEAR_THRESHOLD of S: the decisions a cheaper decider
    # would have to reproduce to that precision to keep MiniLM's groups.
    at_threshold = int((np.abs(sims - similarity) < NEAR_THRESHOLD).sum()) // 2
    cheap_sims = static_vectors @ static_vectors.T
    threshold = candidate_threshold(similarity)
    found = int(((sims >= similarity) & (cheap_sims >= threshold)).sum()) // 2
    missed = (sims >= similarity) & (cheap_sims < threshold)
    kept_reference = {t.id for t in reference.kept}
    kept_tiered = {t.id for t in tiered.kept}
    agree = sum((t.id in kept_reference) == (t.id in kept_tiered) for t in traces)
    share = (tiered.embedded or 0) / len(traces)
    # Static vectors deciding alone, at the static thresholds nearest MiniLM's S: how close
    # the kept set gets to MiniLM-only (why the first pass proposes and does not decide).
    static_only = {}
    for static_similarity in STATIC_ONLY_THRESHOLDS:
        alone = {t.id for t in curate(traces, embedder=cheap, similarity=static_similarity).kept}
        same = sum((t.id in kept_reference) == (t.id in alone) for t in traces)
        static_only[static_similarity] = (len(alone), same / len(traces))
    return {
        "static_only": static_only,
        "traces": len(traces),
        "copies": copies,
        "similarity": similarity,
        "candidate_similarity": threshold,
        "tokens": tokens,
        "static_seconds": static_seconds,
        "static_tokens_per_s": tokens / static_seconds,
        "minilm_seconds": minilm_seconds,
        "minilm_name": minilm.name,
        "reference_pairs": reference_pairs,
        "pairs_at_threshold": at_threshold,
        "pair_recall": found / reference_pairs if reference_pairs else 1.0,
        "missed_pair_static_max": float(cheap_sims[missed].max()) if missed.any() else None,
        "candidate_pairs": tiered.candidate_pairs,
        "embedded": tiered.embedded,
        "kept_reference": len(kept_reference),
        "kept_tiered": len(kept_tiered),
        "kept_agreement": agree / len(traces),
        "grouping_seconds": grouping_seconds,
        "tiered_seconds_estimate": static_seconds + share * minilm_seconds,
    }
