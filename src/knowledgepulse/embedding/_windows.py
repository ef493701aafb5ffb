"""Whole-text embeddings: which token windows of a text are embedded, and how their vectors
become one. Shared by every MiniLM embedder; the embedders only run the encoder on windows.

The method (chosen by retrieval accuracy on the tau-bench conversations; docs/embeddings.md
has the measurements):

- A window is what the model was trained on: ``[CLS]``, at most 254 tokens, ``[SEP]``.
- A text whose tokens fit in one window is that one window: its vector is exactly the
  reference (sentence-transformers) embedding, bit for bit the ``first_window`` output.
- A longer text is cut into consecutive windows of 254 tokens that do not overlap; the last
  window ends at the text's last token (so it overlaps its predecessor rather than being a
  short, noisy remainder). Every token is in at least one window.
- At most ``max_windows`` windows per text (default 64, i.e. 16,256 tokens covered fully).
  Beyond that, ``max_windows`` windows are spread evenly over the token sequence, the first
  starting at token 0 and the last ending at the last token.
- Texts longer than 262,144 characters are not tokenised whole (that alone would take
  seconds and ~150 bytes per character): ``max_windows`` slices of 4,096 characters, evenly
  spaced over the text, first and last included, are tokenised instead, and each slice gives
  one window of its first 254 tokens (the last slice: its last 254), leaving out the words the
  slice cut. Work and memory are bounded by ``max_windows`` × 4,096 characters.
- The window vectors (each unit-norm) are pooled by their element-wise maximum, then
  L2-normalised.

Everything is deterministic: no randomness, and integer arithmetic for the window positions.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, get_args

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from ._minilm import MiniLMTokenizer

__all__ = [
    "MAX_WINDOWS",
    "WINDOWINGS",
    "WINDOWING_ENV",
    "WindowPlan",
    "Windowing",
    "batches_by_tokens",
    "fixed_shape_batches",
    "padded_width",
    "plan_windows",
    "resolve_windowing",
    "window_starts",
]

Windowing = Literal["whole", "first_window"]
WINDOWINGS: tuple[Windowing, ...] = get_args(Windowing)
WINDOWING_ENV = "KNOWLEDGEPULSE_WINDOWING"
MAX_WINDOWS = 64
# Texts up to this many characters are tokenised whole (time and tokenizer memory bounded);
# 64 windows x 254 tokens x 16 characters per token, far more than prose or logs take.
WHOLE_TEXT_CHARS = 262_144
# Whole texts are tokenised in pieces of about this many characters, cut after whitespace,
# so the tokenizer's per-character memory (~150 bytes) stays bounded.
CHUNK_CHARS = 16_384
# Pieces handed to the tokenizer at once (it parallelises over them): ~40 MB at most.
_CHUNKS_AT_ONCE = 16
SLICE_CHARS = 4_096


def resolve_windowing(windowing: str | None) -> Windowing:
    """The windowing to use: ``windowing`` if given, else ``$KNOWLEDGEPULSE_WINDOWING``, else
    ``"whole"``.

    Args:
        windowing: ``"whole"`` (every token of a text is embedded) or ``"first_window"``
            (the text is cut at 256 tokens, as sentence-transformers does), or None.

    Raises:
        ValueError: the value (argument or environment) is neither.
    """
    origin = "windowing"
    if windowing is None:
        windowing = os.environ.get(WINDOWING_ENV, "").strip() or "whole"
        origin = f"${WINDOWING_ENV}"
    value = windowing.strip().lower().replace("-", "_")
    if value not in WINDOWINGS:
        raise ValueError(f"{origin} must be one of {', '.join(WINDOWINGS)}; got {windowing!r}")
    return value


def window_starts(token_count: int, window: int, max_windows: int) -> list[int]:
    """Where each window of a ``token_count``-token text starts (token offsets, ascending).

    Consecutive non-overlapping windows of ``window`` tokens, the last one moved back to end at
    the last token; more than ``max_windows`` of them are replaced by ``max_windows`` evenly
    spaced ones (first at 0, last ending at the last token, starts rounded to the nearest
    integer).
    """
    if token_count <= window or max_windows == 1:
        return [0]
    last = token_count - window
    needed = -(-token_count // window)
    if needed <= max_windows:
        return [min(i * window, last) for i in range(needed)]
    gaps = max_windows - 1
    return [(2 * i * last + gaps) // (2 * gaps) for i in range(max_windows)]


@dataclass(frozen=True)
class WindowPlan:
    """The windows of a batch of texts, text by text.

    ``windows[k]`` holds the token ids (``[CLS]`` and ``[SEP]`` included) of window ``k``;
    ``owner[k]`` is the index of its text (non-decreasing: each text's windows are together).
    """

    windows: list[npt.NDArray[np.int64]]
    owner: npt.NDArray[np.intp]
    texts: int

    def pool(self, vectors: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
        """One unit vector per text from the window vectors (rows in window order): a text's
        only window is copied unchanged; several are pooled by element-wise max and
        L2-normalised."""
        starts = np.searchsorted(self.owner, np.arange(self.texts))
        counts = np.diff(np.append(starts, len(self.owner)))
        if np.all(counts == 1):
            return vectors
        pooled = np.maximum.reduceat(vectors, starts, axis=0)
        several = counts > 1
        norms = np.linalg.norm(pooled[several], axis=1, keepdims=True)
        pooled[several] = pooled[several] / np.maximum(norms, 1e-12)
        return np.ascontiguousarray(pooled, dtype=np.float32)


def plan_windows(
    tokenizer: MiniLMTokenizer,
    texts: Sequence[str],
    windowing: Windowing,
    max_windows: int = MAX_WINDOWS,
) -> WindowPlan:
    """The windows to embed for ``texts`` (see the module docstring for the rule).

    Args:
        tokenizer: the model's tokenizer.
        texts: the texts, in order.
        windowing: ``"first_window"``: one window per text, cut at 256 tokens;
            ``"whole"``: windows covering each text.
        max_windows: most windows per text (>= 1).
    """
    first = tokenizer.ids_batch(texts)
    if windowing == "first_window":
        return WindowPlan(first, np.arange(len(texts), dtype=np.intp), len(texts))
    # A text whose first window is not full fits in it: that window is the whole text.
    full = tokenizer.window_length
    longer = [i for i, ids in enumerate(first) if len(ids) == full]
    per_text: dict[int, list[npt.NDArray[np.int64]]] = {}
    tokenised = [i for i in longer if len(texts[i]) <= WHOLE_TEXT_CHARS]
    for i, ids in zip(tokenised, _content_ids(tokenizer, [texts[i] for i in tokenised])):
        per_text[i] = _windows_of(tokenizer, ids, window_starts(len(ids), full - 2, max_windows))
    for i in longer:
        if len(texts[i]) > WHOLE_TEXT_CHARS:
            per_text[i] = _sampled_windows(tokenizer, texts[i], max_windows)
    windows: list[npt.NDArray[np.int64]] = []
    owner: list[int] = []
    for i, ids in enumerate(first):
        own = per_text.get(i, [ids])
        windows.extend(own)
        owner.extend([i] * len(own))
    return WindowPlan(windows, np.asarray(owner, dtype=np.intp), len(texts))


def _windows_of(
    tokenizer: MiniLMTokenizer, content: npt.NDArray[np.int64], starts: list[int]
) -> list[npt.NDArray[np.int64]]:
    """``[CLS]`` + the window's content tokens + ``[SEP]`` for each start."""
    kept = tokenizer.window_length - 2
    cls = np.array([tokenizer.cls_id], dtype=np.int64)
    sep = np.array([tokenizer.sep_id], dtype=np.int64)
    return [np.concatenate([cls, content[s : s + kept], sep]) for s in starts]


def split_after_whitespace(text: str, size: int) -> list[str]:
    """``text`` in consecutive pieces of at most ``size`` characters, each cut just after a
    whitespace character where the piece has one.

    BERT's normaliser works character by character and its pre-tokeniser splits at every
    whitespace character, so no word spans two pieces and the pieces' tokens, concatenated,
    are the text's tokens. Only a run of ``size`` characters without whitespace is cut inside
    (a "word" that long is a single [UNK] either way, so only the count of [UNK]s can differ).
    """
    pieces = []
    start, length = 0, len(text)
    while length - start > size:
        end = start + size
        cut = max(text.rfind(" ", start, end), text.rfind("\n", start, end))
        if cut <= start:
            cut = next((k for k in range(end - 1, start, -1) if text[k].isspace()), end - 1)
        pieces.append(text[start : cut + 1])
        start = cut + 1
    pieces.append(text[start:])
    return pieces


def _content_ids(tokenizer: MiniLMTokenizer, texts: list[str]) -> list[npt.NDArray[np.int64]]:
    """Every token id of each text, no [CLS]/[SEP], tokenised in bounded pieces."""
    pieces: list[tuple[int, str]] = [
        (i, piece)
        for i, text in enumerate(texts)
        for piece in split_after_whitespace(text, CHUNK_CHARS)
    ]
    parts: list[list[npt.NDArray[np.int64]]] = [[] for _ in texts]
    for start in range(0, len(pieces), _CHUNKS_AT_ONCE):
        group = pieces[start : start + _CHUNKS_AT_ONCE]
        for (i, _), encoding in zip(group, tokenizer.encode_pieces([p for _, p in group])):
            parts[i].append(np.asarray(encoding.ids, dtype=np.int64))
    return [np.concatenate(p) if p else np.zeros(0, dtype=np.int64) for p in parts]


def _sampled_windows(
    tokenizer: MiniLMTokenizer, text: str, max_windows: int
) -> list[npt.NDArray[np.int64]]:
    """One window from each of ``max_windows`` evenly spaced character slices of ``text``."""
    length = len(text)
    last = length - SLICE_CHARS
    count = max(1, max_windows)
    gaps = max(1, count - 1)
    starts = sorted({(2 * i * last + gaps) // (2 * gaps) for i in range(count)})
    slices = [text[s : s + SLICE_CHARS] for s in starts]
    kept = tokenizer.window_length - 2
    windows = []
    for s, encoding in zip(starts, tokenizer.encode_pieces(slices)):
        ids = _whole_words(encoding, cut_before=s > 0, cut_after=s + SLICE_CHARS < length)
        content = ids[-kept:] if s == last else ids[:kept]
        windows.extend(_windows_of(tokenizer, content, [0]))
    return windows


def _whole_words(encoding: Any, *, cut_before: bool, cut_after: bool) -> npt.NDArray[np.int64]:
    """The slice's token ids without its first word (``cut_before``) and last word
    (``cut_after``), which the slice may have cut; all of them if nothing else is left."""
    ids = np.asarray(encoding.ids, dtype=np.int64)
    words = encoding.word_ids
    if not words:
        return ids
    keep = np.ones(len(ids), dtype=bool)
    if cut_before:
        keep &= np.asarray([w != words[0] for w in words])
    if cut_after:
        keep &= np.asarray([w != words[-1] for w in words])
    return ids[keep] if keep.any() else ids


# Padded widths come in steps of this many tokens (see padded_width).
SHAPE_BLOCK = 16


def padded_width(length: int, max_length: int) -> int:
    """The width a window of ``length`` tokens is always computed at: the last width of its
    ``SHAPE_BLOCK``-token block (``16k + 15``), at most ``max_length``.

    Why a width that depends on the window alone: bf16 kernels (OpenVINO's fused attention)
    round differently for different padded widths, so a window padded to its batch's longest
    got a vector that depended on its neighbours. Computed at a width
    set by its own length, a window gets the same bits alone or in any batch. Why ``16k + 15``
    and not a power of two: the attention kernel walks keys in blocks of 16, and any width in
    the window's own block gives the bits of the unpadded window (measured on AVX512-BF16;
    a CPU with other blocks still gets one width per length, hence the same bits everywhere
    on that machine).
    """
    if length < 1:
        raise ValueError(f"a window has at least one token, got {length}")
    return min(SHAPE_BLOCK * (length // SHAPE_BLOCK) + SHAPE_BLOCK - 1, max(max_length, length))


def fixed_shape_batches(
    lengths: npt.NDArray[np.int64], batch_size: int, max_tokens: int, max_length: int
) -> list[tuple[npt.NDArray[np.intp], int]]:
    """Group windows (by index) into inference calls of one padded width each.

    Each window is computed at :func:`padded_width` of its own length, so a call holds only
    windows of the same width; within a width, calls take at most ``batch_size`` windows and
    ``max_tokens`` padded tokens (always >= 1 window). Returns ``(indices, width)`` pairs,
    widths ascending, indices ascending within a call. Which windows share a call does not
    change any window's vector (the runtimes compute rows independently at a fixed shape).
    """
    count = len(lengths)
    if count == 0:
        return []
    widths = np.fromiter(
        (padded_width(int(n), max_length) for n in lengths), dtype=np.int64, count=count
    )
    order = np.lexsort((np.arange(count), widths))
    calls: list[tuple[npt.NDArray[np.intp], int]] = []
    start = 0
    while start < count:
        width = int(widths[order[start]])
        end = start
        while end < count and widths[order[end]] == width:
            end += 1
        rows = max(1, min(batch_size, max_tokens // width))
        for first in range(start, end, rows):
            calls.append((order[first : min(first + rows, end)], width))
        start = end
    return calls


def batches_by_tokens(
    order: npt.NDArray[np.intp], lengths: npt.NDArray[np.int64], batch_size: int, max_tokens: int
) -> list[npt.NDArray[np.intp]]:
    """Split ``order`` (indices sorted by ascending length) into batches of at most
    ``batch_size`` texts and at most ``max_tokens`` padded tokens (always >= 1 text)."""
    batches = []
    start, count = 0, len(order)
    while start < count:
        end = start + 1
        while (
            end < count
            and end - start < batch_size
            and (end - start + 1) * int(lengths[order[end]]) <= max_tokens
        ):
            end += 1
        batches.append(order[start:end])
        start = end
    return batches
