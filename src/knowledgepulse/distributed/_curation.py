"""Curation on Ray: the embedding is spread over the actor pool, the grouping stays here.

:func:`knowledgepulse.scoring._curation.curate` embeds the pile in id order, ``batch_size`` texts per
call; the same calls are made on the pool, in parallel, and curation then runs on the driver
over those vectors, so the kept set and the groups equal a local run's.

With a first pass (the static embedder), the driver makes the static vectors and finds the
traces in a candidate pair (:func:`~knowledgepulse.scoring._curation.candidate_rows`, as a local
run does); only those go to the pool for MiniLM, and the tiered curation then decides over
those vectors, as locally.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._schema import ReasoningTrace
from ..memory._cache import exact_rows
from ..scoring._curation import (
    DEFAULT_SIMILARITY,
    CurationResult,
    candidate_rows,
    candidate_threshold,
    curate,
    distinct_traces,
    embed_traces,
)
from ..scoring._profiles import ProfileRegistry
from ._cluster import import_ray
from ._workers import EmbedPool, PrecomputedEmbedder

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = ["curate_copies_on_ray", "curate_on_ray"]


def curate_on_ray(
    traces: Iterable[ReasoningTrace | Mapping[str, Any]],
    *,
    pool: EmbedPool,
    similarity: float = DEFAULT_SIMILARITY,
    kb: KnowledgeBase | None = None,
    profiles: ProfileRegistry | None = None,
    batch_size: int = 64,
    batches_per_call: int = 16,
    name: str = "ray",
    first_pass: Any = None,
    candidate_similarity: float | None = None,
) -> CurationResult:
    """:func:`knowledgepulse.scoring._curation.curate`, embedding on ``pool``.

    Args:
        traces: the pile (models or mappings); repeated ids: the first one is used.
        pool: the embedding actors (:class:`EmbedPool`).
        similarity: cosine similarity from which two traces are near-duplicates.
        kb: a knowledge base whose traces count as already seen.
        profiles: domain weights (default: the registered profiles).
        batch_size: texts per embedding call (as for the local curation).
        batches_per_call: embedding calls sent to an actor at once.
        name: the embedder's name.
        first_pass: a cheap embedder run on the driver to propose candidate pairs; only the
            traces in one are embedded on the pool (``curate``'s ``first_pass``).
        candidate_similarity: the first pass's cosine from which a pair is a candidate.
    """
    ray = import_ray()
    pile = distinct_traces(traces)
    # The order curate embeds in (by id), in the batches it embeds.
    canonical = sorted(pile, key=lambda t: t.id)
    texts = [trace.embedding_text for trace in canonical]
    cheap = None
    if first_pass is not None and canonical:
        threshold = candidate_threshold(similarity, candidate_similarity)
        rows = embed_traces(first_pass, canonical, batch_size)
        cheap = PrecomputedEmbedder(texts, rows, first_pass.name)
        in_pair, _ = candidate_rows(exact_rows(rows), threshold)
        texts = [text for text, chosen in zip(texts, in_pair.tolist()) if chosen]
    batches = [texts[i : i + batch_size] for i in range(0, len(texts), batch_size)]
    futures = [
        pool.submit(batches[i : i + batches_per_call])
        for i in range(0, len(batches), batches_per_call)
    ]
    import numpy as np

    parts = ray.get(futures)
    vectors = np.concatenate(parts) if parts else np.zeros((0, pool.dimensions), np.float32)
    embedder = PrecomputedEmbedder(texts, vectors, name) if texts else None
    return curate(
        pile,
        embedder=embedder,
        similarity=similarity,
        kb=kb,
        profiles=profiles,
        batch_size=batch_size,
        first_pass=cheap,
        candidate_similarity=candidate_similarity,
    )


def _facets_of_batch(batch: dict[str, Any]) -> dict[str, Any]:
    """A Ray Data batch of trace lines -> their digests and signatures (bytes), in order."""
    import numpy as np

    from ..copies import copy_facets

    traces = [ReasoningTrace.model_validate_json(line) for line in batch["line"]]
    facets = copy_facets(traces)
    return {
        "position": np.asarray(batch["position"], dtype=np.int64),
        "digest": np.array([f.digest for f in facets], dtype=object),
        "signature": np.array(
            [b"" if f.signature is None else f.signature.tobytes() for f in facets], dtype=object
        ),
        "words": np.array([f.words for f in facets], dtype=np.int64),
        "steps": np.array([f.steps or b"" for f in facets], dtype=object),
        "messages": np.array([f.messages for f in facets], dtype=object),
    }


def curate_copies_on_ray(
    traces: Iterable[ReasoningTrace | Mapping[str, Any]],
    *,
    workers: int,
    similarity: float,
    kb: KnowledgeBase | None = None,
    profiles: ProfileRegistry | None = None,
    batch_size: int = 256,
) -> CurationResult:
    """:func:`~knowledgepulse.scoring._copy_curation.curate_copies` with the copy facets made
    by Ray Data (``map_batches`` over the pile in id order, ``workers`` at once); the walk runs
    here over those facets, so the result equals a local run's."""
    import numpy as np

    from ..copies import CopyFacet
    from ..scoring._copy_curation import check_similarity, curate_from_facets
    from ..scoring._curation import trace_value
    from ..scoring._profiles import global_registry

    check_similarity(similarity)
    ray = import_ray()
    registry = profiles if profiles is not None else global_registry().copy()
    pile = distinct_traces(traces)
    canonical = sorted(pile, key=lambda t: t.id)
    facets: list[CopyFacet] = []
    if canonical:
        dataset = ray.data.from_items(
            [{"position": i, "line": trace.to_json()} for i, trace in enumerate(canonical)]
        )
        rows = dataset.map_batches(
            _facets_of_batch,
            batch_size=batch_size,
            compute=ray.data.TaskPoolStrategy(size=max(1, workers)),
        ).take_all()
        # Blocks may come back in any order: the position says where each belongs.
        for row in sorted(rows, key=lambda row: int(row["position"])):
            signature = bytes(row["signature"])
            facets.append(
                CopyFacet(
                    bytes(row["digest"]),
                    np.frombuffer(signature, dtype=np.uint16).copy() if signature else None,
                    int(row["words"]),
                    "run" if signature else "none",
                    bytes(row["steps"]) or None,
                    bytes(row["messages"]),
                )
            )
    values = [trace_value(trace, None, registry) for trace in canonical]
    return curate_from_facets(pile, canonical, values, facets, similarity, kb)
