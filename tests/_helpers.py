"""Shared fixtures: the SPEC's worked example and a small deterministic embedder."""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

WORKED_EXAMPLE: dict[str, Any] = {
    "@context": "https://openknowledgepulse.org/schema/v1",
    "@type": "ReasoningTrace",
    "id": "kp:trace:550e8400-e29b-41d4-a716-446655440000",
    "metadata": {
        "created_at": "2026-01-01T10:00:00Z",
        "task_domain": "code-review",
        "success": True,
        "quality_score": 0,
        "visibility": "network",
        "privacy_level": "aggregated",
    },
    "task": {"objective": "Review PR #42 for security issues"},
    "steps": [
        {"step_id": 0, "type": "thought", "content": "Analyzing diff for injection vectors"},
        {
            "step_id": 1,
            "type": "tool_call",
            "tool": {"name": "github_pr_read"},
            "input": {"pr": 42},
        },
        {"step_id": 2, "type": "observation", "content": "Found unsanitized SQL in handler.ts"},
        {
            "step_id": 3,
            "type": "tool_call",
            "tool": {"name": "static_analysis"},
            "input": {"file": "handler.ts"},
        },
        {"step_id": 4, "type": "observation", "content": "Confirmed SQL injection vulnerability"},
    ],
    "outcome": {
        "result_summary": "Identified 1 critical SQL injection vulnerability",
        "confidence": 0.95,
    },
}


def make_trace(
    steps: Sequence[dict[str, Any]] | None = None,
    *,
    domain: str = "code-review",
    success: bool = True,
    confidence: float = 0.95,
    objective: str = "Review PR #42 for security issues",
    trace_id: str = "kp:trace:test",
    summary: str | None = None,
) -> dict[str, Any]:
    """A valid trace dict: the worked example with the given parts replaced.

    The one trace builder of the tests; ``kp.parse_trace(make_trace(...))`` gives the model.
    """
    trace = copy.deepcopy(WORKED_EXAMPLE)
    trace["id"] = trace_id
    trace["metadata"]["task_domain"] = domain
    trace["metadata"]["success"] = success
    trace["outcome"]["confidence"] = confidence
    trace["task"]["objective"] = objective
    if summary is not None:
        trace["outcome"]["result_summary"] = summary
    if steps is not None:
        trace["steps"] = [{"step_id": i, **step} for i, step in enumerate(steps)]
    return trace


class HashingEmbedder:
    """Bag-of-words hashed into ``dimensions`` buckets: deterministic, instant, model-free.

    Texts sharing words are similar; it stands in for MiniLM where only the cache logic is
    under test.
    """

    name = "HashingEmbedder"

    def __init__(self, dimensions: int = 384) -> None:
        self.dimensions = dimensions
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                bucket = int.from_bytes(
                    hashlib.blake2b(word.encode(), digest_size=4).digest(), "big"
                )
                out[row, bucket % self.dimensions] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        unit: npt.NDArray[np.float32] = np.divide(
            out, norms, out=np.zeros_like(out), where=norms > 0
        )
        return unit


def approx_float(expected: float, *, rel: float | None = None, abs: float | None = None) -> float:
    """``pytest.approx(expected, rel=rel, abs=abs)`` typed as the float it compares equal to.

    It stands for a float inside a record built for comparison, e.g.
    ``Nearest("b", approx_float(1.0, abs=1e-5))``, where the field's type is ``float``.
    """
    return cast(float, pytest.approx(expected, rel=rel, abs=abs))


#: The 200 tau-bench airline conversations shipped with the examples (MIT, gzip-compressed).
TAU_BENCH = (
    Path(__file__).resolve().parents[1] / "examples" / "tau-bench" / "gpt-4o-airline.json.gz"
)


def load_tau_bench() -> list[dict[str, Any]]:
    """The tau-bench conversations as the records of the shipped file."""
    with gzip.open(TAU_BENCH, "rt", encoding="utf-8") as handle:
        records: list[dict[str, Any]] = json.load(handle)
    return records


class CoarseEmbedder(HashingEmbedder):
    """A first pass for the tests: the same words hashed into fewer buckets, so that pairs look
    more alike to it than to the decider (it proposes more than the decider keeps)."""

    name = "CoarseEmbedder"

    def __init__(self) -> None:
        super().__init__(48)


def synthetic(n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` traces over ``n / 4`` tasks, each attempt with a few words of its own."""
    rng = random.Random(seed)
    traces = []
    for i in range(n):
        task = rng.randrange(n // 4 + 1)
        words = " ".join(f"t{task}w{k}" for k in range(12))
        extra = " ".join(f"x{rng.randrange(30)}" for _ in range(3))
        traces.append(
            make_trace(
                trace_id=f"kp:trace:{i:06d}",
                objective=f"{words} {extra}",
                confidence=round(rng.uniform(0.3, 1.0), 2),
            )
        )
    return traces


def score_record(trace_id: str, score: float, **fields: Any) -> Any:
    """A valid :class:`~knowledgepulse.records.ScoreRecord` of ``score`` for ``trace_id``,
    as a knowledge base stores one (the other fields fixed, or given)."""
    from knowledgepulse.records import ScoreRecord

    data: dict[str, Any] = {
        "id": trace_id,
        "score": score,
        "complexity": 0.5,
        "novelty": 0.5,
        "tool_diversity": 0.5,
        "outcome": 1.0,
        "profile": "default",
        "weights": {"complexity": 0.25, "novelty": 0.25, "tool_diversity": 0.25, "outcome": 0.25},
        "novelty_source": "no_embedder",
        "domain": "general",
        "success": True,
        **fields,
    }
    return ScoreRecord.model_validate(data)
