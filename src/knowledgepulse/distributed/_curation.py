"""Curation on Ray: the embedding is spread over the actor pool, the grouping stays here.

:func:`knowledgepulse.scoring._curation.curate` embeds the pile in id order, ``batch_size`` texts per
call; the same calls are made on the pool, in parallel, and curation then runs on the driver
over those vectors, so the kept set and the groups equal a local run's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from .._schema import ReasoningTrace
from ..scoring._curation import DEFAULT_SIMILARITY, CurationResult, curate, distinct_traces
from ..scoring._profiles import ProfileRegistry
from ._cluster import import_ray
from ._workers import EmbedPool, PrecomputedEmbedder

if TYPE_CHECKING:
    from ..kb import KnowledgeBase

__all__ = ["curate_on_ray"]


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
    """
    ray = import_ray()
    pile = distinct_traces(traces)
    # The order curate embeds in (by id), in the batches it embeds.
    texts = [trace.embedding_text for trace in sorted(pile, key=lambda t: t.id)]
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
    )
