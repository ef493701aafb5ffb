"""The bf16 torch embedder: batching by tokens, CPU detection, agreement with fp32."""

from __future__ import annotations

import numpy as np
import pytest

from knowledgepulse.embedding import (
    MiniLMBf16Embedder,
    MiniLMEmbedder,
    _torch_bf16,
    _windows,
    cpu_has_native_bf16,
)

from ._shared import BF16_READY, ONNX_READY

MIN_COSINE = 0.99


def test_batches_respect_text_and_token_limits() -> None:
    lengths = np.array([300, 2, 5, 5, 40, 256, 7], dtype=np.int64)
    order = np.argsort(lengths, kind="stable")
    batches = _windows.batches_by_tokens(order, lengths, 3, 20)
    assert sorted(int(i) for b in batches for i in b) == list(range(len(lengths)))
    for batch in batches:
        assert len(batch) == 1 or (len(batch) <= 3 and len(batch) * lengths[batch].max() <= 20)
    assert [len(b) for b in batches] == [3, 1, 1, 1, 1]  # 2,5,5 | 7 | 40 | 256 | 300


def test_cpu_flag_detection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset({"avx2", "avx512_bf16"}))
    assert cpu_has_native_bf16()
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset({"amx_bf16"}))
    assert cpu_has_native_bf16()
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    assert not cpu_has_native_bf16()
    assert isinstance(_torch_bf16._cpu_flags(), frozenset)


@pytest.mark.embedder
@pytest.mark.skipif(not (BF16_READY and ONNX_READY), reason="needs both embedders installed")
def test_agrees_with_fp32_embedder(reference: tuple[list[str], np.ndarray]) -> None:
    sentences, _ = reference
    bf16 = MiniLMBf16Embedder(batch_size=8).embed(sentences)
    cosines = np.sum(bf16 * MiniLMEmbedder().embed(sentences), axis=1)
    assert cosines.min() >= MIN_COSINE


def test_cpu_path_names_the_kernel_family(monkeypatch: pytest.MonkeyPatch) -> None:
    flags = {"avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset(flags))
    assert _torch_bf16.bf16_cpu_path().name == "amx"
    flags.discard("amx_tile")  # AMX-BF16 without the tile unit enabled: not usable
    assert _torch_bf16.bf16_cpu_path().name == "avx512_bf16"
    flags.discard("avx512_bf16")
    assert _torch_bf16.bf16_cpu_path().name == "none"


@pytest.mark.embedder
@pytest.mark.skipif(not (BF16_READY and ONNX_READY), reason="needs both embedders installed")
def test_weights_are_prepacked_only_on_amx(
    monkeypatch: pytest.MonkeyPatch, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, _ = reference
    packed = MiniLMBf16Embedder(batch_size=8, windowing="first_window")
    model = packed._model()  # loaded with this CPU's own path
    monkeypatch.setattr(
        _torch_bf16, "bf16_cpu_path", lambda: _torch_bf16.Bf16CpuPath("avx512_bf16", "test")
    )
    plain = MiniLMBf16Embedder(batch_size=8, windowing="first_window")
    assert plain._model().prepacked is False
    if model.cpu_path.name != "amx":
        pytest.skip("this CPU has no AMX")
    assert model.prepacked is True
    # Packing changes the weights' layout and the kernels' summation order, nothing else.
    vectors = packed.embed(sentences)
    assert np.sum(vectors * plain.embed(sentences), axis=1).min() >= 0.9999
    fp32 = MiniLMEmbedder(windowing="first_window").embed(sentences)
    assert np.sum(vectors * fp32, axis=1).min() >= MIN_COSINE
