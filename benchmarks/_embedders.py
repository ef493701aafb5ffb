"""The default embedder against sentence-transformers fp32, and every runtime beside it.

All on the same texts in the same run: sentence-transformers fp32 (in a subprocess, torch on
2 threads, batch 32), then the embedder ``choose_embedder("auto")`` returns and, for
comparison, each MiniLM runtime installed here (ONNX Runtime fp32, OpenVINO fp32 and bf16,
torch bf16). Rates are pure embedding (texts/s, batch 32 as sentence-transformers), the best
of several rounds taken in turn, so that the load of other processes spreads over all of them.
Quality: the minimum cosine of each embedder's vectors to sentence-transformers' own.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ._figures import Figure, report

__all__ = ["bench_default_embedder", "sentence_transformers_run"]

DEFAULT_TARGET = 1.5  # default embedder / sentence-transformers fp32
MIN_COSINE = 0.9999

_ST_SCRIPT = r"""
import json, sys, time, os
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np
import torch
torch.set_num_threads(2)
from sentence_transformers import SentenceTransformer
texts = json.load(open(sys.argv[1]))
model = SentenceTransformer(sys.argv[2], device="cpu")
model.encode(texts[:64], batch_size=32)
best = None
for _ in range(int(sys.argv[3])):
    t = time.perf_counter(); vectors = model.encode(texts, batch_size=32); d = time.perf_counter() - t
    best = d if best is None else min(best, d)
np.save(sys.argv[4], vectors.astype(np.float32))
print(len(texts) / best)
"""


def sentence_transformers_run(texts: list[str], rounds: int) -> tuple[float, Any] | None:
    """texts/s of sentence-transformers fp32 (best of ``rounds``) and its vectors, run with the
    interpreter of ``KP_BENCH_ST_PYTHON`` (default: this one); None where it is not installed."""
    from knowledgepulse.embedding._minilm import resolve_model_dir

    python = os.environ.get("KP_BENCH_ST_PYTHON", sys.executable)
    model_dir, _ = resolve_model_dir(None)
    with tempfile.TemporaryDirectory() as tmp:
        path, vectors = Path(tmp) / "texts.json", Path(tmp) / "vectors.npy"
        path.write_text(json.dumps(texts))
        command = [python, "-c", _ST_SCRIPT, str(path), str(model_dir), str(rounds), str(vectors)]
        try:
            out = subprocess.run(command, capture_output=True, text=True, timeout=900)
        except (OSError, subprocess.TimeoutExpired):
            return None
        if out.returncode != 0:
            return None
        return float(out.stdout.strip().splitlines()[-1]), np.load(vectors)


def _runtimes() -> list[Any]:
    """Each MiniLM runtime installed here, cutting texts at 256 tokens as sentence-transformers
    does; bf16 only where the CPU has native bf16 (elsewhere it is emulated, and slower)."""
    from knowledgepulse import embedding

    found: list[Any] = [embedding.MiniLMEmbedder(windowing="first_window")]
    openvino = embedding.MiniLMOpenVINOEmbedder
    found.append(openvino(precision="fp32", windowing="first_window"))
    if embedding.cpu_has_native_bf16():
        found.append(openvino(precision="bf16", windowing="first_window"))
        found.append(embedding.MiniLMBf16Embedder(windowing="first_window"))
    ready = []
    for embedder in found:
        with contextlib.suppress(embedding.EmbedderUnavailable):  # its runtime is not installed
            embedder.warm_up()
            ready.append(embedder)
    return ready


def _rates(embedders: list[Any], texts: list[str], rounds: int) -> list[float]:
    """texts/s of each embedder: the best of ``rounds``, the embedders measured in turn."""
    for embedder in embedders:
        embedder.embed(texts[:64])
    best = [float("inf")] * len(embedders)
    for _ in range(rounds):
        for i, embedder in enumerate(embedders):
            start = time.perf_counter()
            embedder.embed(texts)
            best[i] = min(best[i], time.perf_counter() - start)
    return [len(texts) / seconds for seconds in best]


def bench_default_embedder(
    texts: list[str], reference: tuple[float, Any] | None, quick: bool
) -> None:
    """Report the default embedder's rate as a ratio to sentence-transformers fp32 (target
    1.5x) with its minimum cosine to sentence-transformers' vectors (target 0.9999), saying
    which path it took and why; the other runtimes are reported beside it for comparison.

    Args:
        texts: the texts every embedder embeds.
        reference: what :func:`sentence_transformers_run` returned for ``texts``.
        quick: fewer rounds.
    """
    from knowledgepulse import embedding

    rounds = 2 if quick else 4
    choice = embedding.choose_embedder("auto", windowing="first_window")
    print(f"default embedder (choose_embedder('auto')): {choice.kind}: {choice.reason}")
    if choice.embedder is None:
        report(Figure("default embedder", None, "texts/s", note=choice.reason[:60]))
        return
    runtimes = _runtimes()
    default = next(
        (i for i, e in enumerate(runtimes) if e.name == choice.embedder.name), len(runtimes)
    )
    if default == len(runtimes):
        choice.embedder.warm_up()
        runtimes.append(choice.embedder)
    rates = _rates(runtimes, texts, rounds)
    for i, (embedder, rate) in enumerate(zip(runtimes, rates)):
        is_default = i == default
        label = "default embedder" if is_default else "  for comparison"
        report(Figure(f"{label}: {embedder.name}, embed", rate, "texts/s", lower_is_better=False))
        if reference is None:
            continue
        report(
            Figure(
                "  ratio to sentence-transformers fp32",
                rate / reference[0],
                "×",
                DEFAULT_TARGET if is_default else None,
                lower_is_better=False,
            )
        )
        cosine = float(np.min(np.sum(embedder.embed(texts) * reference[1], axis=1)))
        report(
            Figure(
                "  min cosine to sentence-transformers",
                cosine,
                "",
                MIN_COSINE if is_default else None,
                lower_is_better=False,
            )
        )
