"""Reading the model's weights tensor by tensor (one copy in memory while loading)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from knowledgepulse.embedding._errors import ModelDirectoryError
from knowledgepulse.embedding._minilm import ARCHITECTURE, pick_weights, resolve_model_dir
from knowledgepulse.embedding._weights import read_float32_weights

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def test_reads_the_same_tensors_as_safetensors() -> None:
    model_dir, _ = resolve_model_dir(None)
    if model_dir is None:
        pytest.skip("model package not installed")
    model_file = model_dir / "model.safetensors"
    ours = read_float32_weights(model_file)
    theirs = pick_weights(safetensors_numpy.load_file(str(model_file)), model_file)
    assert list(ours) == list(ARCHITECTURE.weight_shapes())
    for name, array in theirs.items():
        assert ours[name].dtype == np.float32
        np.testing.assert_array_equal(ours[name], array)


def test_bert_prefixed_names_are_read(tmp_path: Path) -> None:
    shapes = ARCHITECTURE.weight_shapes()
    tensors = {
        f"bert.{name}": np.full(shape, i, dtype=np.float32)
        for i, (name, shape) in enumerate(shapes.items())
    }
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    weights = read_float32_weights(path)
    assert [float(w.flat[0]) for w in weights.values()] == [float(i) for i in range(len(shapes))]


def test_a_missing_tensor_is_named(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file({"other": np.zeros(3, dtype=np.float32)}, str(path))
    with pytest.raises(ModelDirectoryError, match=r"embeddings\.word_embeddings\.weight: expected"):
        read_float32_weights(path)


def test_other_dtypes_go_through_safetensors(tmp_path: Path) -> None:
    shapes = ARCHITECTURE.weight_shapes()
    tensors = {name: np.ones(shape, dtype=np.float16) for name, shape in shapes.items()}
    path = tmp_path / "model.safetensors"
    safetensors_numpy.save_file(tensors, str(path))
    weights = read_float32_weights(path)
    assert all(w.dtype == np.float32 and float(w.flat[0]) == 1.0 for w in weights.values())


def test_a_file_that_is_not_safetensors_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"not a safetensors file at all")
    with pytest.raises(Exception, match="header too large"):  # safetensors' own message
        read_float32_weights(path)


def test_freed_memory_is_released_after_each_embed_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from knowledgepulse.embedding import _lazy_minilm, _native_memory

    calls: list[int] = []
    monkeypatch.setattr(_native_memory, "_trim", calls.append)
    monkeypatch.setattr(_native_memory, "_trim_looked_up", True)

    class Fake(_lazy_minilm.LazyMiniLM):  # type: ignore[type-arg]
        def _load(self) -> object:
            return object()

        def _run(self, model: object, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts), 384), dtype=np.float32)

    fake = Fake(None)
    assert fake.embed(["a", "b"]).shape == (2, 384)
    assert fake.embed([]).shape == (0, 384)  # nothing embedded, nothing to release
    assert calls == [0]


def test_releasing_memory_works_on_this_c_library() -> None:
    from knowledgepulse.embedding._native_memory import release_freed_memory

    release_freed_memory()
    release_freed_memory()
