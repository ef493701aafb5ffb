"""The copies seen so far in one process: a trace's copy among them, as it arrives.

What :class:`~knowledgepulse.Scorer` names when its memory is in-process (a knowledge base
answers the same question from its own tables, :meth:`stored_copy`): the exact copy by
digest first (the earliest seen), else the near copy of highest estimated Jaccard similarity
≥ the threshold among the traces sharing an LSH band with it (ties: the earliest seen).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._facet import DEFAULT_SCHEME, CopyFacet, CopyScheme, estimated_similarity
from ._graph import EXACT, NEAR_COPY
from ._pairs import band_keys

__all__ = ["CopyIndex", "CopyMatch"]


@dataclass(frozen=True)
class CopyMatch:
    """The trace a trace is a copy of: its id (None when the reader may not know it), the
    similarity (1.0 for ``exact``, the estimated Jaccard similarity for ``near_copy``) and the
    relation."""

    id: str | None
    similarity: float
    relation: str

    def describe(self) -> str:
        """``an exact copy of ID`` / ``a copy of ID (estimated Jaccard 0.72)``."""
        who = self.id if self.id is not None else "a trace you cannot see"
        if self.relation == EXACT:
            return f"an exact copy of {who}"
        return f"a copy of {who} (estimated Jaccard {self.similarity:.2f})"


class CopyIndex:
    """Copy facets kept in memory, found by digest and by LSH band."""

    def __init__(self, scheme: CopyScheme = DEFAULT_SCHEME) -> None:
        self.scheme = scheme
        self._ids: list[str] = []
        self._signatures: list[npt.NDArray[np.uint16]] = []
        self._by_digest: dict[bytes, int] = {}
        self._by_band: dict[tuple[int, int], list[int]] = {}
        self._by_steps: dict[bytes, list[int]] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, trace_id: str, facet: CopyFacet) -> None:
        """Keep ``facet`` as ``trace_id``'s (a trace with no word is kept by digest only)."""
        position = len(self._ids)
        self._ids.append(trace_id)
        self._by_digest.setdefault(facet.digest, position)
        if facet.signature is None:
            self._signatures.append(np.zeros(0, dtype=np.uint16))
            return
        self._signatures.append(facet.signature)
        if facet.steps is not None:
            self._by_steps.setdefault(facet.steps, []).append(position)
        for band, key in enumerate(band_keys(facet.signature.reshape(1, -1), self.scheme)[0]):
            self._by_band.setdefault((band, int(key)), []).append(position)

    def find(self, facet: CopyFacet, similarity: float) -> CopyMatch | None:
        """The kept trace ``facet``'s trace is a copy of, or None (also for a trace with no
        word: nothing to compare)."""
        if facet.signature is None:
            return None
        exact = self._by_digest.get(facet.digest)
        if exact is not None and len(self._signatures[exact]):
            return CopyMatch(self._ids[exact], 1.0, EXACT)
        keys = band_keys(facet.signature.reshape(1, -1), self.scheme)[0]
        same_steps = set(self._by_steps.get(facet.steps, ())) if facet.steps else set()
        candidates = sorted(
            {p for band, key in enumerate(keys) for p in self._by_band.get((band, int(key)), ())}
            | same_steps
        )
        if not candidates:
            return None
        found = np.asarray(
            estimated_similarity(
                np.stack([self._signatures[p] for p in candidates]),
                np.broadcast_to(facet.signature, (len(candidates), len(facet.signature))),
            )
        ).reshape(-1)
        bar = np.array(
            [self.scheme.reworded if p in same_steps else similarity for p in candidates]
        )
        found = np.where(found >= np.minimum(bar, similarity), found, -1.0)
        found = np.where(found >= bar, found, -1.0)
        best = int(np.argmax(found))  # the first of the highest: the earliest seen
        if found[best] < 0:
            return None
        return CopyMatch(self._ids[candidates[best]], float(found[best]), NEAR_COPY)
