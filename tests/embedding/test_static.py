"""The static embedder derived from MiniLM: its recipe's pieces, its cache, its vectors, and
a knowledge base that keeps its vectors apart from MiniLM's.

Most tests use a synthetic token table written through the real cache writer (building the
real one runs MiniLM over the 30,522 vocabulary tokens: minutes on 2 busy cores); the one
test that builds it for real is marked slow.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from knowledgepulse.cli import main
from knowledgepulse.embedding import _static
from knowledgepulse.embedding._minilm import require_model_dir
from knowledgepulse.embedding._static import (
    STATIC_DIMENSIONS,
    STATIC_MODEL_NAME,
    StaticEmbedder,
    StaticModelError,
    finish_table,
    load_static_model,
    write_static_model,
    zipf_weights,
)
from knowledgepulse.kb import EmbeddingIdentity, KnowledgeBaseMismatchError, open_knowledge_base

from ._shared import ONNX_READY

needs_model = pytest.mark.skipif(not ONNX_READY, reason="MiniLM files/runtime not installed")
VOCAB = 30522


@pytest.fixture(scope="module")
def synthetic_table() -> np.ndarray:
    """A table made by the real recipe from seeded random token vectors."""
    rng = np.random.default_rng(7)
    return finish_table(rng.standard_normal((VOCAB, 384)).astype(np.float32))


@pytest.fixture
def cache(tmp_path: Path, synthetic_table: np.ndarray) -> Path:
    """A valid cache of the synthetic table, card and checksums as a build writes them."""
    directory = tmp_path / "static"
    source = require_model_dir(None, "test")
    card = {**_static._source_card(source), "built_with": "test", "build_seconds": 0.0}
    write_static_model(directory, synthetic_table, card)
    return directory


def test_zipf_weights_are_model2vecs_sif_weights() -> None:
    # p(rank) ∝ 1/(rank+2) over 4 tokens: 1/2, 1/3, 1/4, 1/5 out of 77/60
    p = np.array([1 / 2, 1 / 3, 1 / 4, 1 / 5]) / (77 / 60)
    assert zipf_weights(4) == pytest.approx(1e-4 / (1e-4 + p), rel=1e-12)
    weights = zipf_weights(VOCAB)
    assert np.all(np.diff(weights) > 0)  # rarer (later) tokens weigh more
    assert weights[0] == pytest.approx(1e-4 / (1e-4 + 0.5 / np.sum(1 / np.arange(2, VOCAB + 2))))


def test_the_table_is_deterministic_reduced_and_ordered_by_variance() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((500, 384)).astype(np.float32)
    first = _static._pca(vectors, 256)
    assert first.shape == (500, 256) and first.dtype == np.float32
    assert np.array_equal(first, _static._pca(vectors.copy(), 256))
    variances = first.var(axis=0)
    assert np.all(np.diff(variances) <= 1e-6)
    # orthogonal axes: the projections are uncorrelated
    covariance = np.cov(first[:, :8].T)
    assert np.abs(covariance - np.diag(np.diag(covariance))).max() < 1e-4


@needs_model
def test_a_cached_model_loads_without_building(cache: Path) -> None:
    model = load_static_model(cache_dir=cache, build=False)
    assert model.table.shape == (VOCAB, STATIC_DIMENSIONS)
    assert model.card["model"] == STATIC_MODEL_NAME
    assert model.card["version"] == 1
    assert len(model.card["table_sha256"]) == 64


@needs_model
def test_a_corrupt_table_is_refused_naming_its_path(cache: Path) -> None:
    table_path = cache / "static-minilm-l6-v2-v1-256d.npy"
    data = bytearray(table_path.read_bytes())
    data[-1] ^= 0xFF
    table_path.write_bytes(bytes(data))
    with pytest.raises(StaticModelError) as caught:
        load_static_model(cache_dir=cache, build=False)
    assert str(table_path) in str(caught.value)
    assert "does not match its checksum" in str(caught.value)
    assert caught.value.path == table_path


@needs_model
@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"version": 0}, "was built with version=0, not 1"),
        ({"source_model_sha256": "0" * 64}, "was built with source_model_sha256="),
        ({"dimensions": 128}, "was built with dimensions=128, not 256"),
    ],
)
def test_a_mismatched_card_is_refused_naming_its_path(
    cache: Path, change: dict[str, Any], expected: str
) -> None:
    card_path = cache / "static-minilm-l6-v2-v1-256d.json"
    card = json.loads(card_path.read_text())
    card_path.write_text(json.dumps({**card, **change}))
    with pytest.raises(StaticModelError, match=expected) as caught:
        load_static_model(cache_dir=cache, build=False)
    assert str(card_path) in str(caught.value)


@needs_model
def test_an_unreadable_card_is_refused_naming_its_path(cache: Path) -> None:
    card_path = cache / "static-minilm-l6-v2-v1-256d.json"
    card_path.write_text("{not json")
    with pytest.raises(StaticModelError, match="is unreadable") as caught:
        load_static_model(cache_dir=cache, build=False)
    assert str(card_path) in str(caught.value)


@needs_model
def test_kp_static_model_check_names_the_missing_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(_static.STATIC_MODEL_DIR_ENV, str(tmp_path / "none"))
    assert main(["static-model", "--check"]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'none' / 'static-minilm-l6-v2-v1-256d.npy'}: not built yet" in err


@needs_model
def test_kp_static_model_check_prints_the_card(
    cache: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(_static.STATIC_MODEL_DIR_ENV, str(cache))
    assert main(["static-model", "--check"]) == 0
    card = json.loads(capsys.readouterr().out)
    assert card["model"] == STATIC_MODEL_NAME
    assert card["path"] == str(cache / "static-minilm-l6-v2-v1-256d.npy")


@needs_model
def test_vectors_are_unit_deterministic_and_independent_of_the_batch(cache: Path) -> None:
    embedder = StaticEmbedder(cache_dir=cache, build=False)
    texts = ["refund a cancelled flight", "book a one-way flight to Seattle", "", "[UNK]"]
    together = embedder.embed(texts)
    assert together.shape == (4, STATIC_DIMENSIONS) and together.dtype == np.float32
    assert np.linalg.norm(together, axis=1) == pytest.approx(np.ones(4), abs=1e-6)
    for i, text in enumerate(texts):
        assert np.array_equal(embedder.embed([text])[0], together[i])
    assert np.array_equal(StaticEmbedder(cache_dir=cache, build=False).embed(texts), together)
    # no known token: the empty sentence's vector
    assert np.array_equal(together[2], together[3])


@needs_model
def test_a_pickled_embedder_travels_as_its_arguments(cache: Path) -> None:
    import pickle

    embedder = StaticEmbedder(cache_dir=cache, build=False)
    before = embedder.embed(["refund a cancelled flight"])
    shipped = pickle.dumps(embedder)
    assert len(shipped) < 1000  # not the 31 MB table
    again = pickle.loads(shipped)
    assert (again._cache_dir_arg, again.build) == (cache, False)
    assert np.array_equal(again.embed(["refund a cancelled flight"]), before)


@needs_model
def test_the_whole_text_counts_not_its_first_256_tokens(cache: Path) -> None:
    embedder = StaticEmbedder(cache_dir=cache, build=False)
    head = " ".join(f"word{k}" for k in range(400))
    a, b = embedder.embed([head + " airline refund", head + " database migration"])
    assert len(embedder.token_ids([head])[0]) > 1000
    assert not np.array_equal(a, b)
    # the vector is the normalised mean of the tokens' rows
    table = load_static_model(cache_dir=cache, build=False).table
    ids = embedder.token_ids(["refund a flight"])[0]
    mean = table[ids].astype(np.float64).sum(axis=0)
    assert embedder.embed(["refund a flight"])[0] == pytest.approx(
        mean / np.linalg.norm(mean), abs=1e-6
    )


@needs_model
def test_a_base_of_static_vectors_refuses_minilm_vectors_naming_both(
    tmp_path: Path, cache: Path
) -> None:
    static = EmbeddingIdentity.of(StaticEmbedder(cache_dir=cache))
    assert static == EmbeddingIdentity(STATIC_MODEL_NAME, 256, "whole")
    minilm = EmbeddingIdentity("all-MiniLM-L6-v2", 384, "whole")
    location = tmp_path / "static.sqlite"
    open_knowledge_base(location, static).close()
    with pytest.raises(KnowledgeBaseMismatchError) as caught:
        open_knowledge_base(location, minilm)
    message = str(caught.value)
    assert "static-all-MiniLM-L6-v2/v1 (256 dimensions, whole)" in message
    assert "all-MiniLM-L6-v2 (384 dimensions, whole)" in message
    other = tmp_path / "minilm.sqlite"
    open_knowledge_base(other, minilm).close()
    with pytest.raises(KnowledgeBaseMismatchError, match="static-all-MiniLM-L6-v2/v1"):
        open_knowledge_base(other, static)


@needs_model
def test_kp_score_embedder_static_records_it_in_the_base(
    tmp_path: Path,
    cache: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(_static.STATIC_MODEL_DIR_ENV, str(cache))
    monkeypatch.setattr(_static, "_shared", None)
    examples = Path(__file__).resolve().parents[2] / "examples" / "traces.jsonl"
    base = tmp_path / "kb.sqlite"
    out = tmp_path / "scores.jsonl"
    argv = ["score", str(examples), "--embedder", "static", "--kb", str(base), "-o", str(out)]
    assert main(argv) == 0
    assert "embedder: static-all-MiniLM-L6-v2/v1" in capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 30
    assert any(line["novelty_source"] == "embedding" for line in lines)
    with open_knowledge_base(base) as kb:
        assert kb.identity == EmbeddingIdentity(STATIC_MODEL_NAME, 256, "whole")
        assert len(kb) == 30


@pytest.mark.embedder
@pytest.mark.slow
@needs_model
def test_the_real_build_is_reproducible_and_a_corrupt_cache_is_rebuilt(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = load_static_model(cache_dir=tmp_path)
    checksum = first.card["table_sha256"]
    assert first.card["built_with"] in ("onnxruntime fp32", "openvino fp32")
    first.path.write_bytes(first.path.read_bytes()[:-16])  # truncated
    with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
        again = load_static_model(cache_dir=tmp_path)
    assert str(first.path) in caplog.text and "rebuilding" in caplog.text
    assert again.card["table_sha256"] == checksum
    assert np.array_equal(again.table, first.table)
    # The derived model ranks texts as MiniLM does, roughly: same words beat other words.
    embedder = StaticEmbedder(cache_dir=tmp_path, build=False)
    a, b, c = embedder.embed(
        ["cancel my flight reservation", "please cancel the flight I reserved", "sort a list"]
    )
    assert float(a @ b) > float(a @ c) + 0.2


@needs_model
def test_the_problem_a_command_reports_before_building_names_the_path(
    tmp_path: Path, cache: Path
) -> None:
    from knowledgepulse.embedding import static_model_problem

    assert static_model_problem(cache_dir=cache) is None
    missing = tmp_path / "missing"
    assert static_model_problem(cache_dir=missing) == (
        f"{missing / 'static-minilm-l6-v2-v1-256d.npy'}: not built yet"
    )
    table_path = cache / "static-minilm-l6-v2-v1-256d.npy"
    table_path.write_bytes(table_path.read_bytes()[:-4])
    assert static_model_problem(cache_dir=cache) == (
        f"{table_path} does not match its checksum (corrupt or changed)"
    )
