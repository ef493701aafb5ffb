"""Which traces of a pile are copies of which: exact copies by digest, near copies by MinHash.

Traces with one digest form an exact class (same normalised text and steps, so the same
signature); near-copy pairs are found between classes (:func:`near_pairs`), so a pile of many
exact copies costs one signature per distinct text. :meth:`CopyGraph.neighbours` lists, for one
trace, every other trace that is its copy: its exact class (similarity 1.0, ``exact``), then the
members of each class at estimated Jaccard ≥ the threshold (``near_copy``), most similar first.
Traces with no word are in no class: never grouped, nothing to compare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._facet import MESSAGE_SLOTS, CopyScheme, estimated_similarity
from ._pairs import VERIFY_BLOCK, NearPairs, gather, near_pairs

__all__ = ["EXACT", "NEAR_COPY", "CopyGraph"]

#: The relations a copy group names.
EXACT = "exact"
NEAR_COPY = "near_copy"


@dataclass
class CopyGraph:
    """The copy relation over positions ``0..n-1`` (see the module)."""

    class_of: npt.NDArray[np.int64]  # -1: no word, in no class
    member_offsets: npt.NDArray[np.int64]
    members: npt.NDArray[np.int64]
    near_offsets: npt.NDArray[np.int64]
    near_class: npt.NDArray[np.int64]
    near_similarity: npt.NDArray[np.float64]
    candidates: int
    near_class_pairs: int

    @classmethod
    def build(
        cls,
        digests: npt.NDArray[np.void],
        signatures: npt.NDArray[np.uint16],
        has_words: npt.NDArray[np.bool_],
        scheme: CopyScheme,
        threshold: float,
        rows: npt.NDArray[np.int64] | None = None,
        steps: npt.NDArray[np.void] | None = None,
        sizes: npt.NDArray[np.int64] | None = None,
        messages: npt.NDArray[np.uint8] | None = None,
        objectives: npt.NDArray[np.void] | None = None,
    ) -> CopyGraph:
        """Row ``p`` of ``digests`` (16 bytes each) and ``has_words`` for each position
        ``p``, its signature row ``signatures[rows[p]]`` (``rows`` None: row ``p``, so a
        caller need not copy its signatures into position order); positions without words
        are in no class. ``steps``: each position's steps digest (16 zero bytes: none) and
        ``messages`` its message sketch (rows of :data:`MESSAGE_SLOTS` bytes; None: no
        message is verbatim); classes with the same steps are reworded copies as
        :class:`CopyScheme` says. ``sizes``: each position's shingle count (a truncated copy
        is held in its run) and ``objectives`` its objective digest (8 bytes; a truncated copy
        has its run's)."""
        n = len(digests)
        class_of = np.full(n, -1, dtype=np.int64)
        in_class = np.flatnonzero(has_words)
        # Classes numbered by digest; a class's representative is its first position.
        _, first, inverse = np.unique(digests[in_class], return_index=True, return_inverse=True)
        class_of[in_class] = inverse.reshape(-1)
        representatives = in_class[first]
        classes = len(representatives)
        order = in_class[np.argsort(class_of[in_class], kind="stable")]
        member_offsets = np.zeros(classes + 1, dtype=np.int64)
        np.cumsum(np.bincount(class_of[in_class], minlength=classes), out=member_offsets[1:])
        # The representatives' signatures are read through their rows, never copied (at
        # 10^6 traces a copy would be 256 MB).
        matrix_rows = representatives if rows is None else rows[representatives]
        pairs = near_pairs(
            signatures,
            scheme,
            threshold,
            None if sizes is None else sizes[representatives],
            rows=matrix_rows,
            objectives=None if objectives is None else objectives[representatives],
        )
        if steps is not None:
            sketches = (
                np.zeros((len(representatives), MESSAGE_SLOTS), dtype=np.uint8)
                if messages is None
                else messages[representatives]
            )
            pairs = _with_same_steps(
                pairs, steps[representatives], sketches, signatures, matrix_rows, scheme
            )
        rep = representatives.astype(np.int64)
        # Both directions, then by class and most similar first (ties: the other's first
        # position, which is its smallest: positions are in id order). A pair joined only
        # because one is held in the other goes one way: see _held_edges.
        both = ~pairs.held
        held_from, held_to, held_sims = _held_edges(pairs, sizes, representatives, rep)
        a = np.concatenate((pairs.first[both], pairs.second[both], held_from))
        b = np.concatenate((pairs.second[both], pairs.first[both], held_to))
        sims = np.concatenate((pairs.similarity[both], pairs.similarity[both], held_sims))
        sort = np.lexsort((rep[b] if len(b) else b, -sims, a))
        a, b, sims = a[sort], b[sort], sims[sort]
        near_offsets = np.zeros(classes + 1, dtype=np.int64)
        np.cumsum(np.bincount(a, minlength=classes), out=near_offsets[1:])
        return cls(
            class_of=class_of,
            member_offsets=member_offsets,
            members=order.astype(np.int64),
            near_offsets=near_offsets,
            near_class=b.astype(np.int64),
            near_similarity=sims,
            candidates=pairs.candidates,
            near_class_pairs=len(pairs.first),
        )

    def members_of(self, klass: int) -> npt.NDArray[np.int64]:
        return self.members[self.member_offsets[klass] : self.member_offsets[klass + 1]]

    def neighbours(self, position: int) -> list[tuple[int, float, str]]:
        """Every copy of the trace at ``position``: (position, similarity, relation), exact
        copies first, then near copies most similar first (ties: smallest position)."""
        klass = int(self.class_of[position])
        if klass < 0:
            return []
        found = [(int(p), 1.0, EXACT) for p in self.members_of(klass).tolist() if p != position]
        start, end = self.near_offsets[klass], self.near_offsets[klass + 1]
        for other, similarity in zip(
            self.near_class[start:end].tolist(), self.near_similarity[start:end].tolist()
        ):
            found.extend((int(p), similarity, NEAR_COPY) for p in self.members_of(other).tolist())
        return found

    def copy_counts(self) -> npt.NDArray[np.int64]:
        """How many copies each position has (exact and near)."""
        classes = len(self.member_offsets) - 1
        sizes = np.diff(self.member_offsets)
        near = np.zeros(classes, dtype=np.int64)
        if len(self.near_class):
            owner = np.repeat(np.arange(classes), np.diff(self.near_offsets))
            np.add.at(near, owner, sizes[self.near_class])
        counts = np.zeros(len(self.class_of), dtype=np.int64)
        inside = self.class_of >= 0
        counts[inside] = (sizes - 1 + near)[self.class_of[inside]]
        return counts

    @property
    def wordless(self) -> int:
        """Traces with no word: in no class, never grouped."""
        return int((self.class_of < 0).sum())


def _held_edges(
    pairs: NearPairs,
    sizes: npt.NDArray[np.int64] | None,
    representatives: npt.NDArray[np.int64],
    rep: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """The pairs joined only by containment, as one-way edges (longer class → shorter): a
    truncated copy joins the group of the one run it is most like (highest similarity, ties:
    the smallest first position), never the reverse. A short trace is held in many long runs
    of other tasks (a few common turns); were the edges both ways, it would count them all
    as its copies, lead a group and drop them all (issue 33's lost families)."""
    empty = np.zeros(0, dtype=np.int64)
    if not pairs.held.any() or sizes is None:
        return empty, empty, np.zeros(0)
    first, second = pairs.first[pairs.held], pairs.second[pairs.held]
    similarity = pairs.similarity[pairs.held]
    size = sizes[representatives]
    longer_first = size[first] >= size[second]
    long = np.where(longer_first, first, second)
    short = np.where(longer_first, second, first)
    # The best container of each short class: most similar, then the smallest position.
    order = np.lexsort((rep[long], -similarity, short))
    short, long, similarity = short[order], long[order], similarity[order]
    best = np.ones(len(short), dtype=bool)
    best[1:] = short[1:] != short[:-1]
    return long[best], short[best], similarity[best]


#: 16 zero bytes: a trace whose steps do not identify it.
NO_STEPS = bytes(16)


def verbatim_shares(a: npt.NDArray[np.uint8], b: npt.NDArray[np.uint8]) -> npt.NDArray[np.float64]:
    """:func:`~._facet.verbatim_share` of rows of message sketches ``a`` and ``b``."""
    used = np.maximum((a != 0).sum(axis=1), (b != 0).sum(axis=1))
    agree = ((a == b) & (a != 0)).sum(axis=1)
    return np.asarray(agree / np.maximum(used, 1), dtype=np.float64)


def _with_same_steps(
    pairs: NearPairs,
    steps: npt.NDArray[np.void],
    messages: npt.NDArray[np.uint8],
    signatures: npt.NDArray[np.uint16],
    rows: npt.NDArray[np.int64],
    scheme: CopyScheme,
) -> NearPairs:
    """``pairs`` and the pairs of rows (position ``p``'s signature: ``signatures[rows[p]]``) with the same steps digest that are reworded copies:
    estimated similarity ≥ ``scheme.reworded``, at most ``scheme.reworded_verbatim`` of their
    messages verbatim alike, and one of the two within ``scheme.reworded_margin`` of its most
    similar row with the same steps (a rewording rewords one run, the one it is most like: a
    trace reworded from one run is not also a copy of that run's re-run, which has the same
    steps but is less like it)."""
    n = len(steps)
    has = np.flatnonzero(steps != np.array(NO_STEPS, dtype="V16"))
    if len(has) < 2:
        return pairs
    _, inverse = np.unique(steps[has], return_inverse=True)
    inverse = inverse.reshape(-1)
    order = np.argsort(inverse, kind="stable")
    bounds = np.flatnonzero(np.diff(inverse[order])) + 1
    codes = []
    for bucket in np.split(has[order], bounds):
        if len(bucket) > 1:
            i, j = np.triu_indices(len(bucket), k=1)
            members = np.sort(bucket)
            codes.append(members[i] * n + members[j])
    if not codes:
        return pairs
    found = np.unique(np.concatenate(codes))
    first, second = found // n, found % n
    similarity = np.zeros(len(found), dtype=np.float64)
    for start in range(0, len(found), VERIFY_BLOCK):  # a block of signatures at a time
        block = slice(start, start + VERIFY_BLOCK)
        similarity[block] = np.asarray(
            estimated_similarity(
                gather(signatures, rows, first[block]), gather(signatures, rows, second[block])
            ),
            dtype=np.float64,
        ).reshape(-1)
    best = np.zeros(n, dtype=np.float64)
    np.maximum.at(best, first, similarity)
    np.maximum.at(best, second, similarity)
    known = np.isin(found, pairs.first * n + pairs.second)
    keep = (
        ~known
        & (similarity >= scheme.reworded)
        & (
            (similarity >= best[first] - scheme.reworded_margin)
            | (similarity >= best[second] - scheme.reworded_margin)
        )
    )
    keep[keep] = (
        verbatim_shares(messages[first[keep]], messages[second[keep]]) <= scheme.reworded_verbatim
    )
    return NearPairs(
        np.concatenate((pairs.first, first[keep])),
        np.concatenate((pairs.second, second[keep])),
        np.concatenate((pairs.similarity, similarity[keep])),
        pairs.candidates + int((~known).sum()),
        np.concatenate((pairs.held, np.zeros(int(keep.sum()), dtype=bool))),
    )
