"""Embedding each distinct text once per run: :class:`DeduplicatingEmbedder`.

Agent logs repeat themselves: the same task retried, the same trace exported twice, the same
conversation imported from two files. Embedding is by far the costliest part of scoring, and
an embedder is deterministic, so a text seen before is answered from memory instead.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from . import Embedder, check_embedder

__all__ = ["DEFAULT_MAX_TEXTS", "DeduplicatingEmbedder"]

#: Vectors remembered by default.
# ~2 KiB per remembered text (the vector, its key, the dict's entry): 2,048 texts hold ~4 MiB.
# 10,000 held 20 MiB, which kp score's 350 MiB peak target could not spare.
DEFAULT_MAX_TEXTS = 2_048


def text_key(text: str) -> bytes:
    """What a text is remembered by: a 128-bit hash, so a long text costs 16 bytes to keep."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class DeduplicatingEmbedder:
    """An :class:`~knowledgepulse.embedding.Embedder` that embeds each distinct text once.

    Vectors are remembered by a hash of their text, the least recently used forgotten past
    ``max_texts``. Texts repeated within one call are embedded once too. ``name``,
    ``dimensions`` and every other attribute (``warm_up``, ``precision``…) are the wrapped
    embedder's, so a knowledge base sees the same model.

    Args:
        embedder: the embedder doing the work (checked once, as :class:`Scorer` checks one).
        max_texts: how many vectors to remember (at least 1).
    """

    def __init__(self, embedder: Embedder, max_texts: int = DEFAULT_MAX_TEXTS) -> None:
        if max_texts < 1:
            raise ValueError(f"max_texts must be at least 1, got {max_texts}")
        self.wrapped = check_embedder(embedder)
        self.dimensions: int = self.wrapped.dimensions
        self.name: str = self.wrapped.name
        self.max_texts = max_texts
        self.hits = 0
        self.misses = 0
        self._vectors: OrderedDict[bytes, npt.NDArray[np.float32]] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Vectors for ``texts`` in order, as the wrapped embedder gives them."""
        out = np.empty((len(texts), self.dimensions), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            for position, text in enumerate(texts):
                key = text_key(text)
                vector = self._vectors.get(key)
                if vector is not None:
                    self._vectors.move_to_end(key)
                    out[position] = vector
                    self.hits += 1
                else:
                    missing.setdefault(key, []).append(position)
            self.misses += len(missing)
            # Repeats within this call are found in the next one's memory, not counted twice.
            self.hits += sum(len(positions) - 1 for positions in missing.values())
        if not missing:
            return out
        # The wrapped embedder runs outside the lock: other threads' hits need not wait.
        vectors = self.wrapped.embed([texts[positions[0]] for positions in missing.values()])
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.shape != (len(missing), self.dimensions):
            # Handed on as is: the scorer checks the shape and names the embedder.
            return vectors
        with self._lock:
            for row, (key, positions) in zip(vectors, missing.items()):
                out[positions] = row
                self._vectors[key] = row.copy()
                self._vectors.move_to_end(key)
            while len(self._vectors) > self.max_texts:
                self._vectors.popitem(last=False)
        return out

    def __len__(self) -> int:
        """How many vectors are remembered."""
        return len(self._vectors)

    def __getattr__(self, attribute: str) -> Any:
        # Only called for what this class does not define: the wrapped embedder's own.
        if attribute == "wrapped":
            raise AttributeError(attribute)
        return getattr(self.wrapped, attribute)

    def __repr__(self) -> str:
        return f"DeduplicatingEmbedder({self.wrapped!r}, max_texts={self.max_texts})"
