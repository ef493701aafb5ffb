"""The default embedder against sentence-transformers fp32, and every runtime beside it.

All on the same texts in the same run: sentence-transformers fp32 (in a subprocess, torch on
2 threads, batch 32), then the embedder ``choose_embedder("auto")`` returns and, for
comparison, each MiniLM runtime installed here (ONNX Runtime fp32, OpenVINO fp32 and bf16,
torch bf16). Rates are pure embedding (texts/s, batch 32 as sentence-transformers) over
several passes taken in turn, so that the load of other processes spreads over all of them.
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

__all__ = ["SentenceTransformersReference", "bench_default_embedder"]

DEFAULT_TARGET = 1.5  # default embedder / sentence-transformers fp32
MIN_COSINE = 0.9999

# Sentence-transformers in its own process (torch on 2 threads, batch 32): it answers each
# line on stdin with the seconds of one pass over the texts, so that its passes can be taken
# in turn with the other embedders'; its vectors are saved at the start.
_ST_SCRIPT = r"""
import json, sys, time, os
os.environ["HF_HUB_OFFLINE"] = "1"
import numpy as np
import torch
torch.set_num_threads(2)
from sentence_transformers import SentenceTransformer
texts = json.load(open(sys.argv[1]))
model = SentenceTransformer(sys.argv[2], device="cpu")
np.save(sys.argv[3], model.encode(texts, batch_size=32).astype(np.float32))
print("ready", flush=True)
for _ in sys.stdin:
    t = time.perf_counter(); model.encode(texts, batch_size=32)
    print(time.perf_counter() - t, flush=True)
"""


class SentenceTransformersReference:
    """Sentence-transformers fp32 on ``texts`` in a subprocess run with the interpreter of
    ``KP_BENCH_ST_PYTHON`` (default: this one). ``vectors`` are its embeddings; ``timed_pass``
    times one more pass over the texts. Use :meth:`start`, which gives None where
    sentence-transformers is not installed."""

    def __init__(self, process: subprocess.Popen[str], vectors: Any, count: int) -> None:
        self._process = process
        self.vectors = vectors
        self.count = count

    @classmethod
    def start(cls, texts: list[str]) -> SentenceTransformersReference | None:
        from knowledgepulse.embedding._minilm import resolve_model_dir

        python = os.environ.get("KP_BENCH_ST_PYTHON", sys.executable)
        model_dir, _ = resolve_model_dir(None)
        with tempfile.TemporaryDirectory() as tmp:
            path, vectors = Path(tmp) / "texts.json", Path(tmp) / "vectors.npy"
            path.write_text(json.dumps(texts))
            command = [python, "-c", _ST_SCRIPT, str(path), str(model_dir), str(vectors)]
            try:
                process = subprocess.Popen(
                    command,
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )
            except OSError:
                return None
            assert process.stdout is not None
            if process.stdout.readline().strip() != "ready":
                process.kill()
                process.wait()
                return None
            return cls(process, np.load(vectors), len(texts))

    def timed_pass(self) -> float:
        """Seconds of one pass of sentence-transformers over the texts."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.write("go\n")
        self._process.stdin.flush()
        return float(self._process.stdout.readline())

    def close(self) -> None:
        if self._process.stdin is not None:
            self._process.stdin.close()
        self._process.wait(timeout=60)


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


def _rates(
    embedders: list[Any], texts: list[str], rounds: int, reference: Any
) -> tuple[list[float], float | None]:
    """texts/s of each embedder and of the reference (None: absent) over ``rounds`` passes
    each, all taken in turn. Total texts over total time: the best pass would favour the short
    passes, which can fall into a quiet moment of other processes where a long one cannot."""
    for embedder in embedders:
        embedder.embed(texts[:64])
    seconds = [0.0] * len(embedders)
    reference_seconds = 0.0
    for _ in range(rounds):
        if reference is not None:
            reference_seconds += reference.timed_pass()
        for i, embedder in enumerate(embedders):
            start = time.perf_counter()
            embedder.embed(texts)
            seconds[i] += time.perf_counter() - start
    passes = rounds * len(texts)
    reference_rate = None if reference is None else passes / reference_seconds
    return [passes / s for s in seconds], reference_rate


def bench_default_embedder(
    texts: list[str], reference: SentenceTransformersReference | None, quick: bool, note: str
) -> float | None:
    """Report sentence-transformers fp32's rate and the default embedder's as a ratio to it
    (target 1.5x) with its minimum cosine to sentence-transformers' vectors (target 0.9999),
    saying which path it took and why; the other runtimes are reported beside it.

    Args:
        texts: the texts every embedder embeds.
        reference: sentence-transformers on ``texts``, or None where it is not installed.
        quick: fewer rounds.
        note: what the texts are.

    Returns:
        Sentence-transformers' texts/s, or None.
    """
    from knowledgepulse import embedding

    choice = embedding.choose_embedder("auto", windowing="first_window")
    print(f"default embedder (choose_embedder('auto')): {choice.kind}: {choice.reason}")
    runtimes = _runtimes()
    default = next(
        (i for i, e in enumerate(runtimes) if choice.embedder and e.name == choice.embedder.name),
        None,
    )
    rates, st_rate = _rates(runtimes, texts, 2 if quick else 4, reference)
    report(
        Figure(
            "sentence-transformers fp32 (batch 32, 2 threads), same texts",
            st_rate,
            "texts/s",
            lower_is_better=False,
            note=note if reference else "not installed here (make bench installs it)",
        )
    )
    for i, (embedder, rate) in enumerate(zip(runtimes, rates)):
        label = "default embedder" if i == default else "  for comparison"
        report(Figure(f"{label}: {embedder.name}, embed", rate, "texts/s", lower_is_better=False))
        if reference is None or st_rate is None:
            continue
        report(
            Figure(
                "  ratio to sentence-transformers fp32",
                rate / st_rate,
                "×",
                DEFAULT_TARGET if i == default else None,
                lower_is_better=False,
            )
        )
        cosine = float(np.min(np.sum(embedder.embed(texts) * reference.vectors, axis=1)))
        report(
            Figure(
                "  min cosine to sentence-transformers",
                cosine,
                "",
                MIN_COSINE if i == default else None,
                lower_is_better=False,
                note=f"{cosine:.6f}",
            )
        )
    return st_rate
