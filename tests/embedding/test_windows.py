"""The windowing rule (which tokens each window holds), pooling, and the windowing setting."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledgepulse.embedding import (
    WINDOWING_ENV,
    MiniLMEmbedder,
    _onnx,
    _select,
    choose_embedder,
    select_embedder,
)
from knowledgepulse.embedding._lazy_minilm import LazyMiniLM
from knowledgepulse.embedding._minilm import MiniLMTokenizer, resolve_model_dir
from knowledgepulse.embedding._windows import (
    CHUNK_CHARS,
    WHOLE_TEXT_CHARS,
    WindowPlan,
    plan_windows,
    resolve_windowing,
    split_after_whitespace,
    window_starts,
)

from ._shared import ONNX_READY

needs_tokenizer = pytest.mark.skipif(not ONNX_READY, reason="MiniLM embedder not installed")


# --- window positions -------------------------------------------------------------------------


def test_window_starts_examples() -> None:
    assert window_starts(100, 254, 64) == [0]
    assert window_starts(254, 254, 64) == [0]
    # the last window ends at the last token instead of holding a 92-token remainder
    assert window_starts(600, 254, 64) == [0, 254, 346]
    assert window_starts(762, 254, 64) == [0, 254, 508]
    # over the cap: evenly spaced, first and last included
    assert window_starts(10_000, 100, 5) == [0, 2475, 4950, 7425, 9900]
    assert window_starts(10_000, 100, 1) == [0]


@settings(max_examples=500, deadline=None)
@given(
    tokens=st.integers(min_value=0, max_value=40_000),
    window=st.integers(min_value=1, max_value=300),
    cap=st.integers(min_value=1, max_value=80),
)
def test_windows_cover_every_token_up_to_the_cap(tokens: int, window: int, cap: int) -> None:
    starts = window_starts(tokens, window, cap)
    assert starts[0] == 0
    assert starts == sorted(set(starts))
    assert len(starts) <= max(1, cap)
    assert all(s + window <= tokens for s in starts if tokens > window)
    if tokens > window and cap > 1:
        assert starts[-1] + window == tokens  # the text's end is always embedded
    needed = -(-tokens // window)
    if needed <= cap:
        covered = np.zeros(tokens, dtype=bool)
        for s in starts:
            covered[s : s + window] = True
        assert covered.all()
        assert len(starts) == max(1, needed)
    else:
        assert len(starts) == cap


# --- pooling ----------------------------------------------------------------------------------


def test_pool_copies_single_windows_and_max_pools_several() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(5, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    plan = WindowPlan([np.zeros(3, np.int64)] * 5, np.array([0, 1, 1, 1, 2]), 3)
    pooled = plan.pool(vectors)
    assert pooled.shape == (3, 4) and pooled.dtype == np.float32
    assert np.array_equal(pooled[0], vectors[0]) and np.array_equal(pooled[2], vectors[4])
    expected = vectors[1:4].max(axis=0)
    np.testing.assert_allclose(pooled[1], expected / np.linalg.norm(expected), rtol=1e-6)


def test_pool_without_long_texts_returns_the_vectors() -> None:
    vectors = np.eye(3, dtype=np.float32)
    assert WindowPlan([np.zeros(3, np.int64)] * 3, np.arange(3), 3).pool(vectors) is vectors


# --- splitting for bounded tokenisation -------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "\t", ".", "é"]), max_size=600),
    size=st.integers(min_value=1, max_value=50),
)
def test_split_after_whitespace_keeps_every_character(text: str, size: int) -> None:
    pieces = split_after_whitespace(text, size)
    assert "".join(pieces) == text
    assert all(len(p) <= size for p in pieces)
    for piece in pieces[:-1]:
        # a piece ends with whitespace unless it had none to cut at
        assert piece and (piece[-1].isspace() or not any(c.isspace() for c in piece[1:]))


# --- the setting ------------------------------------------------------------------------------


def test_resolve_windowing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WINDOWING_ENV, raising=False)
    assert resolve_windowing(None) == "whole"
    assert resolve_windowing("First-Window") == "first_window"
    monkeypatch.setenv(WINDOWING_ENV, " first_window ")
    assert resolve_windowing(None) == "first_window"
    assert resolve_windowing("whole") == "whole"
    monkeypatch.setenv(WINDOWING_ENV, "sliding")
    with pytest.raises(ValueError, match=r"\$KNOWLEDGEPULSE_WINDOWING must be one of whole, "):
        resolve_windowing(None)
    with pytest.raises(ValueError, match="windowing must be one of whole, first_window; got 'x'"):
        resolve_windowing("x")


def test_embedders_carry_their_windowing(
    embedder_class: type[LazyMiniLM[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(WINDOWING_ENV, raising=False)
    assert embedder_class().windowing == "whole"
    assert embedder_class(windowing="first_window").windowing == "first_window"
    assert "windowing='whole'" in repr(embedder_class())
    monkeypatch.setenv(WINDOWING_ENV, "first_window")
    assert embedder_class().windowing == "first_window"
    assert embedder_class().max_windows == 64
    with pytest.raises(ValueError):
        embedder_class(windowing="sliding")
    with pytest.raises(ValueError):
        embedder_class(max_windows=0)


@needs_tokenizer
def test_select_embedder_passes_the_windowing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(WINDOWING_ENV, raising=False)
    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER", raising=False)
    monkeypatch.setattr(_select, "_bf16", {})
    first = select_embedder("onnx", windowing="first_window")
    whole = select_embedder("onnx")
    assert isinstance(first, MiniLMEmbedder) and first.windowing == "first_window"
    assert isinstance(whole, MiniLMEmbedder) and whole.windowing == "whole"
    assert first is _onnx.default_embedder("first_window") and whole is _onnx.default_embedder()
    chosen = choose_embedder("auto", bulk=True, windowing="first_window").embedder
    assert getattr(chosen, "windowing", None) == "first_window"
    monkeypatch.setenv(WINDOWING_ENV, "first_window")
    assert select_embedder("onnx") is first
    with pytest.raises(ValueError, match="windowing must be one of"):
        select_embedder("onnx", windowing="all")


# --- the windows of real texts ----------------------------------------------------------------


@pytest.fixture(scope="module")
def tokenizers() -> tuple[MiniLMTokenizer, Any]:
    """The embedders' tokenizer and a plain one that tokenises whole texts."""
    import tokenizers as hf

    model_dir = resolve_model_dir(None)[0]
    assert model_dir is not None
    plain = hf.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    plain.no_padding()
    plain.no_truncation()
    return MiniLMTokenizer(model_dir), plain


def _long_text(words: int) -> str:
    vocabulary = ["flight", "HAT069", "reservation", "économie", "漢字", '{"id":', "42,", "\n"]
    return " ".join(vocabulary[(i * 7 + i // 3) % len(vocabulary)] for i in range(words))


@pytest.mark.embedder
@needs_tokenizer
@pytest.mark.parametrize("words", [10, 253, 600, 9_000, 30_000])
def test_windows_hold_exactly_the_texts_tokens(
    tokenizers: tuple[MiniLMTokenizer, Any], words: int
) -> None:
    tokenizer, plain = tokenizers
    text = _long_text(words)
    assert len(text) > CHUNK_CHARS or words < 9_000  # chunked tokenisation is exercised
    ids = np.asarray(plain.encode(text, add_special_tokens=False).ids, dtype=np.int64)
    plan = plan_windows(tokenizer, [text, "short"], "whole", max_windows=64)
    mine = [w for w, o in zip(plan.windows, plan.owner) if o == 0]
    expected = [
        np.concatenate([[tokenizer.cls_id], ids[s : s + 254], [tokenizer.sep_id]])
        for s in window_starts(len(ids), 254, 64)
    ]
    assert len(mine) == len(expected) == min(64, max(1, -(-len(ids) // 254)))
    assert all(np.array_equal(a, b) for a, b in zip(mine, expected))
    assert list(plan.owner) == [0] * len(mine) + [1]


@pytest.mark.embedder
@needs_tokenizer
def test_first_window_plan_is_the_truncated_text(tokenizers: tuple[MiniLMTokenizer, Any]) -> None:
    tokenizer, _ = tokenizers
    text = _long_text(2_000)
    plan = plan_windows(tokenizer, [text], "first_window")
    assert len(plan.windows) == 1
    assert list(plan.windows[0]) == tokenizer.encode(text).ids


@pytest.mark.embedder
@needs_tokenizer
def test_huge_texts_are_sampled_in_slices(tokenizers: tuple[MiniLMTokenizer, Any]) -> None:
    tokenizer, plain = tokenizers
    text = _long_text(200_000)
    assert len(text) > WHOLE_TEXT_CHARS
    plan = plan_windows(tokenizer, [text], "whole", max_windows=16)
    assert len(plan.windows) == 16
    assert all(len(w) == 256 for w in plan.windows)
    assert list(plan.windows[0]) == tokenizer.encode(text).ids  # starts with the text's start
    tail = plain.encode(text[-2_000:], add_special_tokens=False).ids
    assert list(plan.windows[-1][1:-1]) == tail[-254:]  # ends with the text's end
    assert plan_windows(tokenizer, [text], "whole", max_windows=16).windows[7].tolist() == (
        plan.windows[7].tolist()
    )
