"""The benchmark command runs and prints every core figure with its target (smoke run)."""

from __future__ import annotations

import functools
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

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
            "--json",
            str(out_json),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    for name in (
        "import knowledgepulse",
        "scoring without embedder",
        "cache scan 1,000×384, single query",
        "cache scan 1,000×384, batched",
        # Against the shipped tau-bench file, gzip-compressed (read whole, not skipped).
        "agent rubric: successful_completion agrees with tau-bench reward",
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
