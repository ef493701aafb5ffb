"""DeduplicatingEmbedder: each distinct text embedded once, the vectors unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from knowledgepulse.embedding._dedupe import DeduplicatingEmbedder
from knowledgepulse.tasks import task_text


class CountingEmbedder:
    """A deterministic embedder that records every text it is asked to embed."""

    dimensions = 8
    name = "counting-test-embedder"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.seen.extend(texts)
        rows = [np.random.default_rng(sum(map(ord, t)) + len(t)).normal(size=8) for t in texts]
        out = np.array(rows, dtype=np.float32).reshape(len(texts), 8)
        normalised: npt.NDArray[np.float32] = out / np.linalg.norm(out, axis=1, keepdims=True)
        return normalised

    def warm_up(self) -> None:
        self.seen.append("<warm>")


def test_repeated_texts_are_embedded_once_with_the_same_vectors() -> None:
    inner = CountingEmbedder()
    embedder = DeduplicatingEmbedder(inner)
    first = embedder.embed(["a", "b", "a"])
    second = embedder.embed(["b", "c", "a", "c"])
    assert inner.seen == ["a", "b", "c"]
    reference = CountingEmbedder()
    assert np.array_equal(first, reference.embed(["a", "b", "a"]))
    assert np.array_equal(second, reference.embed(["b", "c", "a", "c"]))
    assert first.dtype == np.float32 and second.shape == (4, 8)
    assert (embedder.hits, embedder.misses, len(embedder)) == (4, 3, 3)


def test_the_least_recently_used_text_is_forgotten_past_the_bound() -> None:
    inner = CountingEmbedder()
    embedder = DeduplicatingEmbedder(inner, max_texts=2)
    embedder.embed(["a", "b"])
    embedder.embed(["a"])  # a is now the most recently used
    embedder.embed(["c"])  # b is forgotten
    embedder.embed(["a", "b"])
    assert inner.seen == ["a", "b", "c", "b"]
    assert len(embedder) == 2


def test_an_empty_call_and_a_changed_result_leave_the_memory_alone() -> None:
    embedder = DeduplicatingEmbedder(CountingEmbedder())
    assert embedder.embed([]).shape == (0, 8)
    vectors = embedder.embed(["a"])
    vectors[0] = 0.0
    assert np.linalg.norm(embedder.embed(["a"])[0]) == pytest.approx(1.0)


def test_it_is_the_wrapped_embedder_to_the_rest_of_knowledgepulse() -> None:
    inner = CountingEmbedder()
    embedder = DeduplicatingEmbedder(inner)
    assert kp.check_embedder(embedder) is embedder
    assert (embedder.name, embedder.dimensions) == ("counting-test-embedder", 8)
    embedder.warm_up()
    assert inner.seen == ["<warm>"]
    with pytest.raises(ValueError, match="max_texts must be at least 1, got 0"):
        DeduplicatingEmbedder(inner, max_texts=0)


def test_scores_are_the_same_with_and_without_deduplication() -> None:
    examples = Path(__file__).resolve().parents[2] / "examples" / "traces.jsonl"
    trace = kp.ReasoningTrace.model_validate_json(examples.read_bytes().splitlines()[0])
    traces = [trace, trace.model_copy(update={"id": "kp:trace:again"}), trace]
    plain = kp.Scorer(embedder=CountingEmbedder()).score_many(traces)
    inner = CountingEmbedder()
    deduplicated = kp.Scorer(embedder=DeduplicatingEmbedder(inner)).score_many(traces)
    assert deduplicated == plain
    # The task novelty embeds each trace's task text, once however often it recurs.
    assert inner.seen == [task_text(trace).text]
