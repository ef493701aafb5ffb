"""Longest common subsequence of two sequences of keys, as pairs of positions."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from difflib import SequenceMatcher

__all__ = ["MAX_CELLS", "lcs_pairs"]

#: The largest table the dynamic programme fills (2,000 x 2,000 keys, about 0.6 s here). Past
#: it the middle is matched by difflib's matching blocks, which are common but not always the
#: longest: a trace of a hundred thousand steps must not hold a server for minutes.
MAX_CELLS = 4_000_000


def lcs_pairs(a: Sequence[Hashable], b: Sequence[Hashable]) -> list[tuple[int, int]]:
    """Positions ``(i, j)`` of one longest common subsequence of ``a`` and ``b``, increasing.

    The common prefix and suffix are taken first (two attempts at one task usually share
    both), the dynamic programme runs on what is left between them. Of several longest
    subsequences the one that matches earliest in ``a`` is kept, so ties align to the left.
    A middle of more than :data:`MAX_CELLS` pairs is matched by difflib's matching blocks.
    """
    n, m = len(a), len(b)
    start = 0
    while start < n and start < m and a[start] == b[start]:
        start += 1
    end_a, end_b = n, m
    while end_a > start and end_b > start and a[end_a - 1] == b[end_b - 1]:
        end_a -= 1
        end_b -= 1
    pairs = [(i, i) for i in range(start)]
    middle = _lcs_middle(a, b, start, end_a, start, end_b)
    pairs.extend(middle)
    pairs.extend((end_a + k, end_b + k) for k in range(n - end_a))
    return pairs


def _lcs_middle(
    a: Sequence[Hashable], b: Sequence[Hashable], a0: int, a1: int, b0: int, b1: int
) -> list[tuple[int, int]]:
    if a0 >= a1 or b0 >= b1:
        return []
    # Keys as small ints: comparing ints is what the inner loop does a quarter million times.
    codes: dict[Hashable, int] = {}
    xs = [codes.setdefault(key, len(codes)) for key in a[a0:a1]]
    ys = [codes.get(key, -1) for key in b[b0:b1]]
    rows, cols = len(xs), len(ys)
    if rows * cols > MAX_CELLS:
        blocks = SequenceMatcher(None, xs, ys, autojunk=False).get_matching_blocks()
        return [(a0 + i + k, b0 + j + k) for i, j, size in blocks for k in range(size)]
    # table[i][j]: the LCS length of xs[i:] and ys[j:], filled from the end so the walk
    # forward from (0, 0) takes the earliest match.
    table = [[0] * (cols + 1) for _ in range(rows + 1)]
    for i in range(rows - 1, -1, -1):
        row, below, x = table[i], table[i + 1], xs[i]
        for j in range(cols - 1, -1, -1):
            if x == ys[j]:
                row[j] = below[j + 1] + 1
            else:
                right, down = row[j + 1], below[j]
                row[j] = right if right > down else down
    pairs: list[tuple[int, int]] = []
    i = j = 0
    while i < rows and j < cols:
        if xs[i] == ys[j]:
            pairs.append((a0 + i, b0 + j))
            i += 1
            j += 1
        elif table[i + 1][j] >= table[i][j + 1]:
            i += 1
        else:
            j += 1
    return pairs
