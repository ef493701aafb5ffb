"""Near-copy pairs of many signatures at once: LSH bands propose, the estimate decides.

Each band of ``rows`` 16-bit values is one 64-bit key; two signatures are a candidate pair when
they share a key in some band. Per band the keys are sorted and every run of equal keys gives
its pairs, so memory holds one band's keys and the candidate pairs, never a bucket table; the
pairs of the bands are merged into the distinct ones as they come (a pair of near copies shares
most of the 32 bands: kept band by band, a pile's pairs would take ~25 times their distinct
number). A candidate is a near copy when the estimated Jaccard similarity over the whole
signature is ≥ the threshold. Everything is numpy over arrays: 10^6 signatures take seconds.
The signatures may be read through a row map (``rows``), so a caller never copies them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ._facet import CopyScheme, estimated_similarity

__all__ = ["NearPairs", "band_keys", "contained", "near_pairs"]

#: Candidate pairs verified per block (pairs x permutations values compared at once).
VERIFY_BLOCK = 65_536
#: Band pairs held before they are merged into the distinct pairs found so far (8 bytes each).
_MERGE_FROM = 4_000_000


def band_keys(signatures: npt.NDArray[np.uint16], scheme: CopyScheme) -> npt.NDArray[np.uint64]:
    """The LSH key of every band of every signature: shape (n, bands), uint64 (each band as
    :func:`band_key` makes it, every band's rows keyed together: a few array operations, not
    a few a band, which for one trace at a time cost more than the hashing)."""
    n, width = signatures.shape[0], scheme.bands * scheme.rows
    bands = signatures[:, :width].reshape(n * scheme.bands, scheme.rows)
    return _key(bands).reshape(n, scheme.bands)


def band_key(
    signatures: npt.NDArray[np.uint16], scheme: CopyScheme, band: int
) -> npt.NDArray[np.uint64]:
    """The LSH key of one band of every signature: its ``rows`` 16-bit values side by side."""
    return _key(signatures[:, band * scheme.rows : (band + 1) * scheme.rows])


def _key(columns: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint64]:
    """One band's values of every row side by side in a 64-bit key (the first value in the
    lowest 16 bits). A value at a time: at 10^6 rows a wider temporary would cost memory."""
    key = np.zeros(columns.shape[0], dtype=np.uint64)
    for row in range(columns.shape[1]):
        key |= columns[:, row].astype(np.uint64) << np.uint64(16 * row)
    return key


def gather(
    signatures: npt.NDArray[np.uint16],
    rows: npt.NDArray[np.int64] | None,
    index: npt.NDArray[np.int64],
) -> npt.NDArray[np.uint16]:
    """The signatures of ``index`` (positions; through the row map ``rows`` when given)."""
    return signatures[index if rows is None else rows[index]]


def distinct_band_pairs(
    signatures: npt.NDArray[np.uint16],
    scheme: CopyScheme,
    rows: npt.NDArray[np.int64] | None = None,
) -> npt.NDArray[np.int64]:
    """Every pair of positions sharing a key in some band, once, sorted, encoded
    ``first * n + second``; memory holds the distinct pairs and a few bands' pairs."""
    n = signatures.shape[0] if rows is None else len(rows)
    codes = np.zeros(0, dtype=np.int64)
    waiting: list[npt.NDArray[np.int64]] = []
    held = 0
    for band in range(scheme.bands):
        columns = signatures[:, band * scheme.rows : (band + 1) * scheme.rows]
        found = _band_pairs(_key(columns if rows is None else columns[rows]), n)
        waiting.append(found)
        held += len(found)
        if held >= _MERGE_FROM:
            waiting.insert(0, codes)
            del codes  # held by waiting alone, which _merged empties once joined
            codes = _merged(waiting)
            held = 0
    if waiting:
        waiting.insert(0, codes)
        del codes
        codes = _merged(waiting)
    return codes


def _merged(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    """The distinct codes of ``parts``, sorted: ``np.unique`` of them joined, but the parts
    let go once joined and the join sorted in place (``np.unique`` copies its input once more:
    at 10^6 traces, hundreds of MB at the peak)."""
    merged = np.concatenate(parts)
    parts.clear()
    merged.sort()
    if len(merged) < 2:
        return merged
    first = np.empty(len(merged), dtype=bool)
    first[0] = True
    np.not_equal(merged[1:], merged[:-1], out=first[1:])
    return merged[first]


@dataclass
class NearPairs:
    """Pairs of rows (``first`` < ``second``) whose estimated similarity is ≥ the threshold,
    with it; ``candidates`` is how many distinct pairs the bands proposed. ``held`` marks the
    pairs joined only because one is held in the other (below the threshold): a truncated
    copy belongs to its run, never the run to it."""

    first: npt.NDArray[np.int64]
    second: npt.NDArray[np.int64]
    similarity: npt.NDArray[np.float64]
    candidates: int
    held: npt.NDArray[np.bool_]


def _band_pairs(keys: npt.NDArray[np.uint64], n: int) -> npt.NDArray[np.int64]:
    """Pairs of rows sharing a key, encoded ``first * n + second`` (first < second)."""
    order = np.argsort(keys, kind="stable")
    ordered = keys[order]
    same = ordered[1:] == ordered[:-1]
    if not same.any():
        return np.zeros(0, dtype=np.int64)
    # Runs of equal keys: [start, end) in the sorted order.
    edges = np.flatnonzero(np.diff(np.concatenate(([False], same, [False])).astype(np.int8)))
    starts, ends = edges[0::2], edges[1::2] + 1
    found = []
    sizes = ends - starts
    pairs_of_two = starts[sizes == 2]
    if len(pairs_of_two):
        a, b = order[pairs_of_two], order[pairs_of_two + 1]
        found.append(np.minimum(a, b) * n + np.maximum(a, b))
    for start, end in zip(starts[sizes > 2].tolist(), ends[sizes > 2].tolist()):
        members = np.sort(order[start:end])
        i, j = np.triu_indices(len(members), k=1)
        found.append(members[i] * n + members[j])
    return np.concatenate(found).astype(np.int64)


def contained(
    jaccard: npt.NDArray[np.float64], size_a: npt.NDArray[np.int64], size_b: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """How much of the smaller shingle set the larger holds, from the Jaccard similarity and
    the two sizes: ``|A ∩ B| = J (|A| + |B|) / (1 + J)``, over ``min(|A|, |B|)``."""
    a, b = size_a.astype(np.float64), size_b.astype(np.float64)
    shared = jaccard * (a + b) / (1.0 + jaccard)
    return np.asarray(np.minimum(shared / np.maximum(np.minimum(a, b), 1.0), 1.0))


def near_pairs(
    signatures: npt.NDArray[np.uint16],
    scheme: CopyScheme,
    threshold: float,
    sizes: npt.NDArray[np.int64] | None = None,
    rows: npt.NDArray[np.int64] | None = None,
    objectives: npt.NDArray[np.void] | None = None,
) -> NearPairs:
    """The near-copy pairs among ``signatures`` (rows; with ``rows``, position ``p`` is row
    ``rows[p]``): estimated Jaccard ≥ ``threshold``, or, with the positions' shingle counts
    ``sizes``, one held in the other (containment ≥ ``scheme.contained``, Jaccard ≥
    ``scheme.contained_floor``: a truncated copy), with the same objective digest when the
    positions' ``objectives`` are given (a truncated copy starts as its run starts)."""
    n = signatures.shape[0] if rows is None else len(rows)
    empty = np.zeros(0, dtype=np.int64)
    if n < 2:
        return NearPairs(empty, empty, np.zeros(0), 0, np.zeros(0, dtype=bool))
    # One band's keys at a time: memory holds n keys and the pairs, not n x bands keys.
    codes = distinct_band_pairs(signatures, scheme, rows)
    firsts, seconds, sims, helds = [], [], [], []
    for start in range(0, len(codes), VERIFY_BLOCK):
        block = codes[start : start + VERIFY_BLOCK]
        first, second = block // n, block % n
        similarity = np.asarray(
            estimated_similarity(gather(signatures, rows, first), gather(signatures, rows, second)),
            dtype=np.float64,
        )
        near = similarity >= threshold
        keep = near.copy()
        if sizes is not None:
            held = contained(similarity, sizes[first], sizes[second]) >= scheme.contained
            held &= similarity >= scheme.contained_floor
            if objectives is not None:
                held &= objectives[first] == objectives[second]
            keep |= held
        firsts.append(first[keep])
        seconds.append(second[keep])
        sims.append(similarity[keep])
        helds.append(~near[keep])
    if not firsts:
        return NearPairs(empty, empty, np.zeros(0), 0, np.zeros(0, dtype=bool))
    return NearPairs(
        np.concatenate(firsts),
        np.concatenate(seconds),
        np.concatenate(sims),
        len(codes),
        np.concatenate(helds),
    )
