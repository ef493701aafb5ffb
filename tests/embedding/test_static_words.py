"""The static embedder's tokenisation by cached chunks and words gives exactly the tokens
MiniLM's tokenizer gives for the whole text, and its vectors do not depend on the batch, the
cache or the order of the tokens."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from knowledgepulse import ReasoningTrace
from knowledgepulse.embedding import _static, _static_tokens
from knowledgepulse.embedding._minilm import require_model_dir
from knowledgepulse.embedding._static import StaticEmbedder, finish_table, write_static_model
from knowledgepulse.embedding._windows import CHUNK_CHARS

from ._shared import ONNX_READY

pytestmark = pytest.mark.skipif(not ONNX_READY, reason="MiniLM files/runtime not installed")

VOCAB = 30522


@pytest.fixture(scope="module")
def tokens() -> Any:
    return _static_tokens.StaticTokens(require_model_dir(None, "test"))


@pytest.fixture(scope="module")
def reference(tokens: Any) -> Any:
    """MiniLM's own tokenizer, as the old static embedder ran it."""
    return tokens._tokenizer


def whole(reference: Any, unk: int, text: str) -> list[int]:
    """The tokenizer's ids of the whole text, [UNK] left out."""
    return [i for i in reference.encode(text, add_special_tokens=False).ids if i != unk]


def multiset(ids: np.ndarray, counts: np.ndarray) -> Counter[int]:
    out: Counter[int] = Counter()
    for i, c in zip(ids.tolist(), counts.tolist()):
        out[i] += c
    return out


def tau_bench_texts() -> list[str]:
    from benchmarks._corpus import tau_bench_traces

    return [ReasoningTrace.model_validate(t).embedding_text for t in tau_bench_traces()]


@pytest.fixture(scope="module")
def tau_texts() -> list[str]:
    texts = tau_bench_texts()
    if not texts:
        pytest.skip("examples/tau-bench is not in this checkout")
    return texts


def test_every_tau_bench_text_has_exactly_the_tokenizers_tokens(
    tokens: Any, reference: Any, tau_texts: list[str]
) -> None:
    assert len(tau_texts) == 200
    # some texts hold non-ASCII characters (the tokenizer's path), some are longer than a
    # piece of the old tokenisation
    assert 0 < sum(not t.isascii() for t in tau_texts) < 200
    assert max(map(len, tau_texts)) > CHUNK_CHARS
    tokens.cache.clear()
    cold = tokens.ids(tau_texts)
    warm = tokens.ids(tau_texts)
    counted = tokens.counted_ids(tau_texts)
    for text, a, b, (ids, counts) in zip(tau_texts, cold, warm, counted):
        expected = whole(reference, tokens.unk_id, text)
        # the same sequence, not only the same multiset
        assert a.tolist() == expected
        assert b.tolist() == expected
        assert multiset(ids, counts) == Counter(expected)


def test_printable_ascii_is_lowercased_and_its_punctuation_split(
    tokens: Any, reference: Any
) -> None:
    # every ASCII character between two words: controls (but tab, newline and carriage return)
    # are removed, joining the words; the other non-alphanumerics are words of their own
    for code in range(128):
        text = f"Ab{chr(code)}Cd"
        expected = whole(reference, tokens.unk_id, text)
        assert tokens.ids([text])[0].tolist() == expected, repr(text)
        printable = 32 < code < 127 and not chr(code).isalnum()
        if printable:
            assert reference.encode(text, add_special_tokens=False).tokens == [
                "ab",
                chr(code),
                "cd",
            ]
        elif code in (0x09, 0x0A, 0x0D, 0x20):
            assert reference.encode(text, add_special_tokens=False).tokens == ["ab", "cd"]
        elif not chr(code).isalnum():
            assert reference.encode(text, add_special_tokens=False).tokens == ["abc", "##d"]


ADVERSARIAL = st.sampled_from(
    [
        "word",
        "Tokenisation",
        "ID8XK2",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "\x0b",
        "\x0c",
        "\x1c",
        "\x1f",
        "\x85",
        "\xa0",
        "\x7f",
        "\x00",
        "\ufffd",
        "\u200b",
        "\u3000",
        "\u2028",
        "é",
        "e\u0301",
        "\u0301",
        "naïve",
        "İ",
        "ß",
        "Σ",
        "ﬁ",
        "漢字",
        "。",
        "😀",
        "👍🏽",
        "x" * 150,
        "a" * 100,
        "a" * 101,
        "é" * 120,
        "[SEP]",
        "[sep]",
        "[CLS",
        "[MASK]]",
        "[[UNK]]",
        "[PAD][PAD]",
        "!!!",
        "...",
        "'",
        '"',
        "\\",
        "`~",
        "{}",
        "_",
        "-",
        "",
    ]
)
TEXTS = st.one_of(
    st.lists(ADVERSARIAL, max_size=30).map("".join),
    st.text(max_size=60),
    st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=80),
    st.lists(st.one_of(ADVERSARIAL, st.text(max_size=4)), max_size=20).map("".join),
    # many chunks, so that more than _SPARSE_CHUNKS of them hold characters beyond ASCII
    st.lists(st.one_of(ADVERSARIAL, st.text(max_size=4)), min_size=40, max_size=120).map(" ".join),
)


@settings(max_examples=400, deadline=None)
@given(text=TEXTS)
def test_adversarial_text_has_exactly_the_tokenizers_tokens(
    tokens: Any, reference: Any, text: str
) -> None:
    expected = whole(reference, tokens.unk_id, text)
    assert tokens.ids([text])[0].tolist() == expected
    ids, counts = tokens.counted_ids([text])[0]
    assert multiset(ids, counts) == Counter(expected)


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(TEXTS, max_size=6))
def test_a_texts_tokens_do_not_depend_on_its_batch_or_the_cache(
    tokens: Any, texts: list[str]
) -> None:
    together = tokens.ids(texts)
    tokens.cache.clear()
    alone = [tokens.ids([text])[0] for text in reversed(texts)][::-1]
    assert [a.tolist() for a in together] == [a.tolist() for a in alone]


def test_a_chunk_longer_than_a_piece_is_cut_where_the_tokens_do_not_change(
    tokens: Any, reference: Any
) -> None:
    unit = "é" + "x" * 60 + "\u3000" + "y" * 40 + "," + "漢"
    long_chunk = unit * (3 * CHUNK_CHARS // len(unit))
    # "[SEP]" across the piece boundary: cut after the comma, not after its "[" (which is
    # punctuation too, and later)
    special = "é" + "ab" * 100 + "," + "ab" * ((CHUNK_CHARS - 204) // 2) + "[SEP]" + "cd" * 10
    # no cut point at all: a run of one word, [UNK] whole and in its pieces
    word = "é" * (2 * CHUNK_CHARS + 500)
    for text in (long_chunk, special, word, "intro " + long_chunk + " outro"):
        assert len(text) > CHUNK_CHARS
        assert tokens.ids([text])[0].tolist() == whole(reference, tokens.unk_id, text)
    assert 102 in tokens.ids([special])[0].tolist()


def test_text_dense_with_non_ascii_chunks_has_exactly_the_tokenizers_tokens(
    tokens: Any, reference: Any
) -> None:
    words = ["naïve", "Résumé", "東京", "[SEP]", "x\x1cy", "\x85", "plain", "ASCII,", "é" * 120]
    text = "\n".join(" ".join(words[(k + j) % len(words)] for j in range(7)) for k in range(300))
    units = tokens._units(text)
    assert sum(not unit.isascii() for unit in units) > 10 * _static_tokens._SPARSE_CHUNKS
    assert tokens.ids([text])[0].tolist() == whole(reference, tokens.unk_id, text)


def test_long_ascii_words_are_unk_beyond_wordpieces_limit(tokens: Any, reference: Any) -> None:
    for length in (99, 100, 101, 150, 3 * CHUNK_CHARS):
        text = "start " + "Ab1" * (length // 3) + "x" * (length % 3) + " end, again"
        assert tokens.ids([text])[0].tolist() == whole(reference, tokens.unk_id, text)


def test_the_cache_is_bounded_and_keeps_what_is_in_use() -> None:
    # an entry of a 2-3 character key and one id costs 170-171 bytes: 4 fit in 700
    assert _static_tokens._ENTRY_BYTES == 160
    cache = _static_tokens.UnitCache(700)
    for k in range(100):
        cache.put(f"w{k}", (k,))
        assert cache.spent <= 700
        assert len(cache.recent) <= 4 and len(cache) <= 8
        assert cache.get("w0") == (0,)  # in use: moved back each time its generation turns
    assert cache.get("w50") is None
    assert cache.get("w99") == (99,)
    # beyond ASCII a character counts four bytes: 160 + 4 * 2 + 8 * 3
    cache.clear()
    cache.put("漢字", (1, 2, 3))
    assert (len(cache), cache.spent) == (1, 192)


def test_a_small_cache_turning_over_gives_the_same_tokens(
    tokens: Any, tau_texts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = tau_texts[:40]
    expected = [a.tolist() for a in tokens.ids(texts)]
    monkeypatch.setattr(tokens, "cache", _static_tokens.UnitCache(64 * 200))
    for _ in range(2):
        assert [a.tolist() for a in tokens.ids(texts)] == expected
        assert tokens.cache.spent <= 64 * 200 and len(tokens.cache) <= 2 * 64 * 200 // 160


@pytest.fixture(scope="module")
def embedder(tmp_path_factory: pytest.TempPathFactory) -> StaticEmbedder:
    """A static embedder over a table made by the real recipe from seeded random vectors."""
    rng = np.random.default_rng(11)
    table = finish_table(rng.standard_normal((VOCAB, 384)).astype(np.float32))
    directory: Path = tmp_path_factory.mktemp("static")
    source = require_model_dir(None, "test")
    card = {**_static._source_card(source), "built_with": "test", "build_seconds": 0.0}
    write_static_model(directory, table, card)
    return StaticEmbedder(cache_dir=directory, build=False)


def test_vectors_match_the_sum_in_token_order_and_not_the_batch_or_the_cache(
    embedder: StaticEmbedder, reference: Any, tau_texts: list[str]
) -> None:
    texts = [*tau_texts, "", "[UNK]", "\x00\x01", "a" * 500, "refund a flight"]
    table = embedder.model.table
    vectors = embedder.embed(texts)
    unk = embedder._load().tokens.unk_id
    worst = 0.0
    for text, vector in zip(texts, vectors):
        ids = np.array(whole(reference, unk, text), dtype=np.int64)
        if len(ids) == 0:
            assert np.array_equal(vector, embedder._load().empty)
            continue
        # the old vector: rows summed in float64 in the text's order
        total = table[ids].sum(axis=0, dtype=np.float64)
        old = (total / np.linalg.norm(total)).astype(np.float32)
        worst = max(worst, float(np.abs(old - vector).max()))
    # the sums differ in their order only: float64 rounding, far below float32's
    assert worst <= 1e-6
    # bit for bit: alone, in the batch, after a cache clear, from token_ids
    embedder._load().tokens.cache.clear()
    alone = np.stack([embedder.embed([text])[0] for text in reversed(texts)][::-1])
    assert np.abs(alone - vectors).max() <= 1e-6
    assert np.array_equal(alone, vectors)
    assert np.array_equal(embedder.embed_ids(embedder.token_ids(texts)), vectors)
    shuffled = [np.random.default_rng(1).permutation(ids) for ids in embedder.token_ids(texts)]
    assert np.array_equal(embedder.embed_ids(shuffled), vectors)


def test_threads_sharing_the_cache_get_the_same_tokens(
    tokens: Any, tau_texts: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    texts = tau_texts[:60]
    expected = [a.tolist() for a in tokens.ids(texts)]
    # a small cache, so that the threads turn its generations over while others read it
    monkeypatch.setattr(tokens, "cache", _static_tokens.UnitCache(300 * 200))

    def run(seed: int) -> bool:
        order = np.random.default_rng(seed).permutation(len(texts))
        got = tokens.ids([texts[k] for k in order])
        return all(got[j].tolist() == expected[k] for j, k in enumerate(order))

    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(run, range(8)))
