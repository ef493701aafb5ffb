"""A text's vector depends on the text alone: embedded by itself or inside any batch, the
same bits (issue: the default bf16 embedder gave a text 2.2e-4 different components in a
batch, so a borderline near-duplicate could flip with --batch-size)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from knowledgepulse.embedding import MiniLMOpenVINOEmbedder
from knowledgepulse.embedding._windows import fixed_shape_batches, padded_width

from ._shared import KINDS, NOT_READY, READY, kind_param

pytestmark = pytest.mark.embedder

# Texts of many lengths: short ones (one window each, of different widths) and long ones
# (several 256-token windows), so every batch mixes widths.
_WORDS = ["agent", "tool", "refund", "booking", "error", "retry", "user", "policy", "flight"]


def _texts() -> list[str]:
    rng = np.random.default_rng(7)
    texts = []
    for n in (3, 9, 17, 30, 47, 64, 90, 128, 200, 260, 700):
        texts.append(" ".join(_WORDS[int(i)] + str(int(j)) for i, j in rng.integers(0, 9, (n, 2))))
    return texts


@pytest.fixture(scope="module", params=[kind_param(k) for k in ("openvino", "onnx")])
def whole_text_embedder(request: pytest.FixtureRequest) -> Any:
    cls, _ = KINDS[request.param]
    model = cls(windowing="whole")
    model.warm_up()
    return model


def test_alone_equals_in_any_batch_bit_for_bit(whole_text_embedder: Any) -> None:
    texts = _texts()
    alone = np.vstack([whole_text_embedder.embed([t]) for t in texts])
    together = whole_text_embedder.embed(texts)
    reversed_ = whole_text_embedder.embed(texts[::-1])[::-1]
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_array_equal(reversed_, alone)
    for size in (2, 3, 7):
        chunks = [
            whole_text_embedder.embed(texts[i : i + size]) for i in range(0, len(texts), size)
        ]
        np.testing.assert_array_equal(np.vstack(chunks), alone)


def test_small_batches_give_the_same_bits(whole_text_embedder: Any) -> None:
    """The embedder's own batch size (windows per call) does not change any vector."""
    cls = type(whole_text_embedder)
    texts = _texts()
    expected = whole_text_embedder.embed(texts)
    for batch_size in (1, 3):
        other = cls(windowing="whole", batch_size=batch_size)
        np.testing.assert_array_equal(other.embed(texts), expected)


@pytest.mark.skipif(not READY["openvino"], reason=NOT_READY["openvino"])
def test_openvino_streams_give_the_latency_bits() -> None:
    """kp score's OpenVINO embedder (THROUGHPUT: a batch's calls side by side on several
    streams) gives every text the bits of the one-stream LATENCY embedder, in any batch."""
    texts = _texts()
    latency = MiniLMOpenVINOEmbedder(windowing="whole")
    streams = MiniLMOpenVINOEmbedder(windowing="whole", performance_hint="THROUGHPUT")
    expected = np.vstack([latency.embed([t]) for t in texts])
    np.testing.assert_array_equal(streams.embed(texts), expected)
    np.testing.assert_array_equal(streams.embed(texts[::-1])[::-1], expected)
    small = MiniLMOpenVINOEmbedder(windowing="whole", performance_hint="THROUGHPUT", batch_size=1)
    np.testing.assert_array_equal(small.embed(texts), expected)
    assert small._model().streams >= 1  # as many calls in flight as the CPU has streams


def test_padded_width_is_the_end_of_the_16_token_block() -> None:
    assert [padded_width(n, 256) for n in (1, 15, 16, 37, 47, 48, 240, 255, 256)] == [
        15,
        15,
        31,
        47,
        47,
        63,
        255,
        255,
        256,
    ]


def test_padded_width_refuses_an_empty_window() -> None:
    with pytest.raises(ValueError, match="at least one token"):
        padded_width(0, 256)


def test_fixed_shape_batches_group_by_width_and_bound_tokens() -> None:
    lengths = np.array([256, 5, 40, 256, 12, 256, 44, 256], dtype=np.int64)
    calls = fixed_shape_batches(lengths, batch_size=3, max_tokens=600, max_length=256)
    assert [(c.tolist(), w) for c, w in calls] == [
        ([1, 4], 15),
        ([2, 6], 47),
        ([0, 3], 256),
        ([5, 7], 256),
    ]
    assert fixed_shape_batches(np.zeros(0, dtype=np.int64), 4, 100, 256) == []
