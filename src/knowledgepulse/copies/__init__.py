"""Copies: which traces are the same run, decided by their words, no embedder.

- :func:`copy_facet` / :func:`copy_facets` — a trace's digest of its normalised text (exact
  copies) and MinHash signature of its run text (near copies), made as :class:`CopyScheme`
  says (:data:`DEFAULT_SCHEME`).
- :func:`estimated_similarity` — the Jaccard similarity two signatures estimate;
  :func:`verbatim_share` — the share of two traces' messages written word for word alike.
- :func:`near_pairs` — LSH bands over many signatures, each candidate decided by the estimate.
- :class:`CopyGraph` — every trace's copies in a pile (``exact``, ``near_copy``).
- :class:`CopyIndex` — the copies seen so far in a process; :class:`CopyMatch` names the
  copy found (the Scorer, the service and the MCP tools all name copies with it).
- :data:`COPY_SIMILARITY` — the estimated Jaccard similarity from which two traces are copies.

docs/knowledge-base.md says what a copy is and how the parameters were chosen.
"""

from __future__ import annotations

from ._facet import (
    DEFAULT_SCHEME,
    CopyFacet,
    CopyScheme,
    copy_facet,
    copy_facets,
    estimated_similarity,
    facets_of_texts,
    normalise,
    run_text,
    trace_texts,
    verbatim_share,
    whole_text,
)
from ._graph import EXACT, NEAR_COPY, CopyGraph
from ._index import CopyIndex, CopyMatch
from ._pairs import NearPairs, band_keys, near_pairs

#: Estimated Jaccard similarity of word shingles of the run text from which two traces are
#: copies (docs/knowledge-base.md: chosen on the realistic pile of ``python -m benchmarks
#: copies``, above every pair of attempts at one tau-bench task).
COPY_SIMILARITY = 0.6

__all__ = [
    "COPY_SIMILARITY",
    "DEFAULT_SCHEME",
    "EXACT",
    "NEAR_COPY",
    "CopyFacet",
    "CopyGraph",
    "CopyIndex",
    "CopyMatch",
    "CopyScheme",
    "NearPairs",
    "band_keys",
    "copy_facet",
    "copy_facets",
    "estimated_similarity",
    "facets_of_texts",
    "near_pairs",
    "normalise",
    "run_text",
    "trace_texts",
    "verbatim_share",
    "whole_text",
]
