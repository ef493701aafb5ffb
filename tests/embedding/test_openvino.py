"""The OpenVINO embedder: reference quality in bf16 and fp32, windowing, precision by CPU."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

import knowledgepulse as kp
from _helpers import TAU_BENCH, load_tau_bench
from knowledgepulse.embedding import MiniLMEmbedder, MiniLMOpenVINOEmbedder, _torch_bf16
from knowledgepulse.importers import convert

from ._shared import ONNX_READY, OPENVINO_READY

# The quality bar for the default embedder: cosine to the fp32 reference, text by text.
MIN_COSINE = 0.9999
TESTS = Path(__file__).parents[1]
EXAMPLES = TESTS.parent / "examples" / "traces.jsonl"
TAU_SAMPLE = TESTS / "data" / "tau_bench_sample.json"
TAU_CORPUS = TAU_BENCH

needs_openvino = pytest.mark.skipif(
    not (OPENVINO_READY and ONNX_READY),
    reason="OpenVINO embedder not installed (pip install 'knowledgepulse[embed]')",
)


def _tau_bench_texts() -> list[str]:
    """Embedding texts of tau-bench conversations: the full corpus's first 12 where it is
    present, else the four in the test data."""
    records = load_tau_bench()[:12]
    return [trace.embedding_text for record in records for trace in convert("openai", record)]


def _bundled_texts() -> list[str]:
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()
    return [kp.ReasoningTrace.model_validate_json(line).embedding_text for line in lines if line]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return _bundled_texts() + _tau_bench_texts()


@pytest.fixture(scope="module")
def fp32_reference(texts: list[str]) -> dict[str, np.ndarray]:
    """ONNX Runtime fp32 (sentence-transformers' output to ~1e-7) for each windowing."""
    return {w: MiniLMEmbedder(windowing=w).embed(texts) for w in ("first_window", "whole")}


def test_precision_follows_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset({"avx512f", "amx_bf16"}))
    model = MiniLMOpenVINOEmbedder()
    assert (model.precision, model.name) == ("bf16", "all-MiniLM-L6-v2 (openvino bf16)")
    monkeypatch.setattr(_torch_bf16, "_cpu_flags", lambda: frozenset({"avx512f", "avx2"}))
    model = MiniLMOpenVINOEmbedder()
    assert (model.precision, model.name) == ("fp32", "all-MiniLM-L6-v2 (openvino fp32)")
    forced = MiniLMOpenVINOEmbedder(precision="bf16", performance_hint="throughput")
    assert (forced.precision, forced.performance_hint) == ("bf16", "THROUGHPUT")
    assert forced.load_seconds is None


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "fp16"}, "precision must be 'bf16' or 'fp32', got 'fp16'"),
        ({"performance_hint": "fast"}, "performance_hint must be 'LATENCY' or 'THROUGHPUT'"),
        ({"max_batch_tokens": 0}, "max_batch_tokens must be >= 1, got 0"),
    ],
)
def test_rejects_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        MiniLMOpenVINOEmbedder(**kwargs)


@pytest.mark.embedder
@needs_openvino
@pytest.mark.parametrize("precision", ["bf16", "fp32"])
@pytest.mark.parametrize("windowing", ["first_window", "whole"])
def test_reference_quality_on_bundled_and_tau_bench_texts(
    texts: list[str], fp32_reference: dict[str, np.ndarray], precision: str, windowing: str
) -> None:
    if precision == "bf16" and not _torch_bf16.cpu_has_native_bf16():
        pytest.skip("the CPU has no native bf16 (OpenVINO would emulate it)")
    got = MiniLMOpenVINOEmbedder(precision=precision, windowing=windowing).embed(texts)
    want = fp32_reference[windowing]
    assert got.shape == (len(texts), 384) and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cosines = np.sum(got * want, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= (MIN_COSINE if precision == "bf16" else 0.999999), (
        texts[worst][:60],
        float(cosines.min()),
    )


@pytest.mark.embedder
@needs_openvino
def test_whole_windowing_differs_from_first_window_only_on_long_texts(texts: list[str]) -> None:
    whole = MiniLMOpenVINOEmbedder(windowing="whole", precision="fp32")
    first = MiniLMOpenVINOEmbedder(windowing="first_window", precision="fp32")
    tokenizer = whole._model().tokenizer
    long = [t for t in texts if len(tokenizer._probe.encode(t).ids) > 254]
    short = [t for t in texts if t not in long]
    assert long and short
    assert np.min(np.sum(whole.embed(short) * first.embed(short), axis=1)) > 0.999999
    assert np.max(np.sum(whole.embed(long) * first.embed(long), axis=1)) < 0.9999
    assert (whole.windowing, first.windowing) == ("whole", "first_window")


@pytest.mark.embedder
@needs_openvino
def test_threads_share_the_model_and_agree() -> None:
    import threading

    model = MiniLMOpenVINOEmbedder(threads=1, batch_size=4)
    sentences = [f"step {i}: the agent called the search tool" for i in range(12)]
    alone = model.embed(sentences)
    results: dict[int, np.ndarray] = {}

    def worker(n: int) -> None:
        results[n] = model.embed(sentences)

    workers = [threading.Thread(target=worker, args=(n,)) for n in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert sorted(results) == [0, 1, 2]
    for vectors in results.values():
        np.testing.assert_array_equal(vectors, alone)
