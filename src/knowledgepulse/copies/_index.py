"""The copies seen so far in one process: a trace's copy among them, as it arrives.

What :class:`~knowledgepulse.Scorer` names when its memory is in-process (a knowledge base
answers the same question from its own tables, :meth:`stored_copy`): the exact copy by
digest first (the earliest seen), else the near copy of highest estimated Jaccard similarity
≥ the threshold among the traces sharing an LSH band with it, or a reworded copy among those
with the same steps (:class:`~._facet.CopyScheme`; ties: the earliest seen).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ._facet import DEFAULT_SCHEME, CopyFacet, CopyScheme, estimated_similarity, verbatim_share
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
    """Copy facets kept in memory, found by digest and by LSH band.

    With a ``capacity``, the oldest facet goes when a new one would exceed it: the copies
    remembered are those of the traces a ring-buffer memory of that size (a
    :class:`~knowledgepulse.memory.VectorCache`) still holds, so a copy is only named among
    the traces novelty is measured against.
    """

    def __init__(self, scheme: CopyScheme = DEFAULT_SCHEME, capacity: int | None = None) -> None:
        self.scheme = scheme
        self.capacity = capacity
        self._first = 0  # the position of the oldest facet still kept
        self._ids: dict[int, str] = {}
        self._signatures: dict[int, npt.NDArray[np.uint16]] = {}
        self._keys: dict[int, tuple[bytes, bytes | None, list[tuple[int, int]]]] = {}
        self._messages: dict[int, bytes] = {}
        self._next = 0
        self._by_digest: dict[bytes, list[int]] = {}
        self._by_band: dict[tuple[int, int], list[int]] = {}
        self._by_steps: dict[bytes, list[int]] = {}

    def __len__(self) -> int:
        return len(self._ids)

    def clear(self) -> None:
        """Forget every facet."""
        self._first = self._next = 0
        for table in (self._ids, self._signatures, self._keys, self._messages):
            table.clear()
        self._by_digest.clear()
        self._by_band.clear()
        self._by_steps.clear()

    def add(self, trace_id: str, facet: CopyFacet) -> None:
        """Keep ``facet`` as ``trace_id``'s (a trace with no word is kept by digest only)."""
        position = self._next
        self._next += 1
        self._ids[position] = trace_id
        self._messages[position] = facet.messages
        self._by_digest.setdefault(facet.digest, []).append(position)
        bands: list[tuple[int, int]] = []
        if facet.signature is None:
            self._signatures[position] = np.zeros(0, dtype=np.uint16)
        else:
            self._signatures[position] = facet.signature
            if facet.steps is not None:
                self._by_steps.setdefault(facet.steps, []).append(position)
            keys = band_keys(facet.signature.reshape(1, -1), self.scheme)[0]
            bands = [(band, int(key)) for band, key in enumerate(keys)]
            for band_key in bands:
                self._by_band.setdefault(band_key, []).append(position)
        self._keys[position] = (facet.digest, facet.steps, bands)
        while self.capacity is not None and len(self._ids) > self.capacity:
            self._forget(self._first)
            self._first += 1

    def _forget(self, position: int) -> None:
        digest, steps, bands = self._keys.pop(position)
        del self._ids[position], self._signatures[position], self._messages[position]
        _drop(self._by_digest, digest, position)
        if steps is not None:
            _drop(self._by_steps, steps, position)
        for band_key in bands:
            _drop(self._by_band, band_key, position)

    def find(self, facet: CopyFacet, similarity: float) -> CopyMatch | None:
        """The kept trace ``facet``'s trace is a copy of, or None (also for a trace with no
        word: nothing to compare)."""
        if facet.signature is None:
            return None
        for exact in self._by_digest.get(facet.digest, ()):
            if len(self._signatures[exact]):  # the earliest kept with words
                return CopyMatch(self._ids[exact], 1.0, EXACT)
        keys = band_keys(facet.signature.reshape(1, -1), self.scheme)[0]
        # Same steps, at most a few messages verbatim alike: a reworded copy from a lower bar.
        same_steps = {
            p
            for p in (self._by_steps.get(facet.steps, ()) if facet.steps else ())
            if verbatim_share(self._messages[p], facet.messages) <= self.scheme.reworded_verbatim
        }
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


def _drop(table: dict[Any, list[int]], key: Any, position: int) -> None:
    found = table.get(key)
    if found is not None:
        found.remove(position)
        if not found:
            del table[key]
