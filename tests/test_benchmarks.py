"""The benchmark command runs and prints every core figure with its target (smoke run)."""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_benchmark_quick_core_figures(tmp_path: Path) -> None:
    out_json = tmp_path / "figures.json"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--quick",
            "--skip",
            "embedder",
            "--skip",
            "bulk",
            "--skip",
            "cli",
            "--skip",
            "kb",
            "--skip",
            "redaction",
            "--skip",
            "mcp",
            "--skip",
            "curation",
            # The curation-scale section's code on a small pile: kp curate runs on 300 traces
            # only where the CPU's MiniLM is fast enough for 30 s (on 2 cores it is not).
            "--curation-sizes",
            "300",
            "--curation-budget",
            "30",
            # The copies section's code on a small pile: no kp curate run (today's embeds
            # whole traces with MiniLM, ~1 trace/s here) and no MiniLM; SemHash scored.
            "--copies-sizes",
            "200",
            "--copies-budget",
            "0",
            "--copies-minilm",
            "0",
            "--json",
            str(out_json),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,  # a smoke run: the ANN builds alone take minutes on 2 busy cores
    )
    assert result.returncode == 0, result.stderr
    for name in (
        "import knowledgepulse",
        "scoring without embedder",
        "cache scan 1,000×384, single query",
        "cache scan 1,000×384, batched",
        # Against the shipped tau-bench file, gzip-compressed (read whole, not skipped).
        "agent rubric: successful_completion agrees with tau-bench reward",
        "copies: SemHash static, cosine ≥ 0.95, 200, precision",
    ):
        assert name in result.stdout
    figures = json.loads(out_json.read_text())
    by_name = {f["name"]: f for f in figures}
    single = by_name["cache scan 1,000×384, single query"]
    assert single["target"] == 30 and single["value"] > 0 and single["status"] in {"met", "NOT met"}
    assert "targets not met:" in result.stdout
    # Every figure says where it was measured: the header names the CPU.
    assert result.stdout.splitlines()[0].endswith(")")


def test_measure_matmul_gflops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks._matmul import measure_matmul_gflops

    small = functools.partial(measure_matmul_gflops, m=64, k=64, n=64, repeats=2)
    assert small("fp32", backend="numpy") > 0
    if importlib.util.find_spec("torch") is not None:
        assert small("bf16", threads=None) > 0
    with pytest.raises(ValueError):
        measure_matmul_gflops("bf16", backend="numpy")
    with pytest.raises(ValueError):
        measure_matmul_gflops("int4", m=8, k=8, n=8)  # type: ignore[arg-type]


def test_knowledge_base_figures_at_a_small_size(capsys: pytest.CaptureFixture[str]) -> None:
    from benchmarks import _figures
    from benchmarks._kb import bench_kb

    before = len(_figures.FIGURES)
    bench_kb(True, ann_vectors=3000, size=3000)
    names = [f.name for f in _figures.FIGURES[before:]]
    assert names == [
        "knowledge base: bulk add (SQLite)",
        "knowledge base: open at 3,000 traces (fresh process)",
        "novelty query p50, exact at 3,000 vectors",
        "novelty query p50, ANN (HNSW) at 3,000 vectors",
        "ANN recall@1 against exact at 3,000 vectors",
    ]
    assert all(f.value is not None for f in _figures.FIGURES[before:])
    assert "ANN recall@1" in capsys.readouterr().out


def test_semhash_is_handed_texts_whose_embedding_it_reads_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The curation-scale section hands SemHash each text cut to the characters holding the
    512 tokens it reads (so that 10^6 texts fit in memory): its embedding of every cut text is
    the one of the whole text, and the tokens counted for it are the ones it reads."""
    model2vec = pytest.importorskip("model2vec")
    tokenizers = pytest.importorskip("tokenizers")
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import _corpus
    from benchmarks._curation_scale import SEMHASH_CHARS, SEMHASH_TOKENS, semhash_input

    import knowledgepulse as kp
    from knowledgepulse.embedding import _static_tokens
    from knowledgepulse.embedding._minilm import resolve_model_dir

    model_dir = resolve_model_dir(None)[0]
    if model_dir is None or not _corpus.TAU_BENCH.is_file():
        pytest.skip("MiniLM files or tau-bench not installed")
    tokens = _static_tokens.StaticTokens(model_dir)
    tokenizer = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    # Any table: what is compared is which tokens the encoder reads.
    table = np.random.default_rng(0).standard_normal((tokenizer.get_vocab_size(), 16))
    model = model2vec.StaticModel(vectors=table.astype(np.float32), tokenizer=tokenizer)
    texts = [kp.ReasoningTrace.model_validate(t).embedding_text for t in _corpus.tau_bench_traces()]
    # Two texts equal up to the cut: SemHash, which merges equal texts, must still see two.
    texts.append(texts[0] + " and one more word")
    handed = [semhash_input(text, lambda t: len(tokens.ids([t])[0])) for text in texts]
    cut = [i for i, (h, _) in enumerate(handed) if h != texts[i]]
    assert len(cut) > 100  # most conversations are longer than the cut
    assert len({h for h, _ in handed}) == len(set(texts)) == len(texts)
    for text, (given, read) in zip(texts, handed):
        assert read == min(len(tokens.ids([text])[0]), SEMHASH_TOKENS)
        if given != text:  # the text's first characters, then its 32-hex-digit digest
            start, digest = given[:-33], given[-33:]
            assert text.startswith(start) and len(start) <= SEMHASH_CHARS
            assert digest[0] == " " and len(digest) == 33
    whole = model.encode([texts[i] for i in cut])
    assert np.array_equal(model.encode([handed[i][0] for i in cut]), whole)
