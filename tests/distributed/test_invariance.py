"""The same input gives the same bytes however it is batched or spread: kp score and
kp curate with --batch-size 1, 7 and 64, --workers 1 and 2, and --engine ray, with the
automatic embedder (OpenVINO bf16 on a CPU with native bf16) and with ONNX Runtime.

A text's vector depends on the text alone (embedders compute each window at a width set by
its own length) and similarities are exact (VectorCache keeps vectors on a grid where float64
dot products are exact), so nothing may differ, not even in the last digit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from knowledgepulse.cli import main
from knowledgepulse.embedding import embedder_available

pytestmark = [
    pytest.mark.embedder,
    pytest.mark.skipif(not embedder_available(), reason="needs the MiniLM embedder"),
]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces.jsonl"

# (name, extra arguments): every way of running that must not change a byte
_SCORE_RUNS = [
    ("batch-1", ["--batch-size", "1"]),
    ("batch-7", ["--batch-size", "7"]),
    ("batch-64", ["--batch-size", "64"]),
    ("workers-1", ["--workers", "1"]),
    ("workers-2", ["--workers", "2"]),
    ("ray", ["--engine", "ray", "--workers", "2"]),
]
_CURATE_RUNS = [
    ("batch-1", ["--batch-size", "1"]),
    ("batch-7", ["--batch-size", "7"]),
    ("batch-64", ["--batch-size", "64"]),
    ("workers-1", ["--workers", "1"]),
    ("workers-2", ["--workers", "2"]),
    ("ray", ["--engine", "ray", "--workers", "2"]),
]


@pytest.fixture(autouse=True)
def _real_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    # the suite turns the automatic embedder off; these tests are about the real one
    monkeypatch.delenv("KNOWLEDGEPULSE_EMBEDDER", raising=False)


def _input(tmp_path: Path) -> Path:
    """The bundled examples twice over (exact copies meet their originals in and across
    batches), ids made unique so curation sees every line."""
    lines = EXAMPLES.read_text(encoding="utf-8").splitlines()
    copies = [line.replace('"id": "kp:trace:', '"id": "kp:trace:copy-', 1) for line in lines]
    path = tmp_path / "traces.jsonl"
    path.write_text("\n".join(lines + copies[::-1]) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("embedder", ["auto", "onnx"])
def test_kp_score_is_byte_identical_across_batches_workers_and_ray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], embedder: str
) -> None:
    source = _input(tmp_path)
    outputs = {}
    for name, extra in _SCORE_RUNS:
        out = tmp_path / f"{name}.jsonl"
        code = main(["score", str(source), "-o", str(out), "--embedder", embedder, *extra])
        capsys.readouterr()
        assert code == 0, name
        outputs[name] = out.read_bytes()
    assert len(outputs["batch-1"].splitlines()) == 60
    assert b'"novelty_source":"embedding"' in outputs["batch-1"]
    different = [name for name, data in outputs.items() if data != outputs["batch-1"]]
    assert different == []


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
@pytest.mark.parametrize("embedder", ["auto", "onnx"])
def test_kp_curate_is_byte_identical_across_batches_workers_and_ray(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], embedder: str
) -> None:
    source = _input(tmp_path)
    outputs = {}
    for name, extra in _CURATE_RUNS:
        kept, groups = tmp_path / f"{name}-kept.jsonl", tmp_path / f"{name}-groups.jsonl"
        code = main(
            [
                "curate",
                "--by",
                "embedding",
                str(source),
                "-o",
                str(kept),
                "--groups",
                str(groups),
                "--embedder",
                embedder,
                *extra,
            ]
        )
        capsys.readouterr()
        assert code == 0, name
        outputs[name] = (kept.read_bytes(), groups.read_bytes())
    assert outputs["batch-1"][1]  # the copies are grouped with their originals
    different = [name for name, data in outputs.items() if data != outputs["batch-1"]]
    assert different == []
