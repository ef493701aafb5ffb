"""Order-free curation: the kept set depends on the set of traces, never on their order."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import knowledgepulse as kp
from _helpers import TAU_BENCH, HashingEmbedder, load_tau_bench, make_trace
from knowledgepulse._curation import curate
from knowledgepulse.cli import main
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base

TAU = TAU_BENCH


def pile() -> list[dict[str, Any]]:
    """Six tasks, each tried two to four times with small wording changes."""
    traces = []
    for task in range(6):
        words = " ".join(f"t{task}w{k}" for k in range(12))
        for attempt in range(2 + task % 3):
            traces.append(
                make_trace(
                    trace_id=f"kp:trace:task{task}-try{attempt}",
                    objective=f"{words} try{attempt}",
                    confidence=0.5 + 0.1 * attempt,
                )
            )
    return traces


def test_near_duplicates_are_grouped_and_the_best_is_kept() -> None:
    traces = pile()
    result = curate(traces, embedder=HashingEmbedder(), similarity=0.8)
    kept = sorted(t.id for t in result.kept)
    # One per task: the attempt with the highest confidence has the highest value.
    assert kept == sorted(f"kp:trace:task{t}-try{1 + t % 3}" for t in range(6))
    for group in result.groups:
        assert group.kept in kept
        assert all(d.similarity >= 0.8 for d in group.duplicates)
        assert all(
            d.value is not None and d.value <= (group.kept_value or 0) for d in group.duplicates
        )
        assert group.reason.startswith("kept for the highest value")
    assert result.dropped == len(traces) - 6


def test_the_kept_set_ignores_the_order() -> None:
    traces = pile()
    reference = curate(traces, embedder=HashingEmbedder(), similarity=0.8)
    for seed in range(10):
        shuffled = traces[:]
        random.Random(seed).shuffle(shuffled)
        result = curate(shuffled, embedder=HashingEmbedder(), similarity=0.8)
        assert {t.id for t in result.kept} == {t.id for t in reference.kept}
        assert [g.to_dict() for g in result.groups] == [g.to_dict() for g in reference.groups]
        # Kept traces come out in the order they came in.
        order = [t["id"] for t in shuffled]
        assert [t.id for t in result.kept] == [i for i in order if i in {t.id for t in result.kept}]


def test_ties_on_value_keep_the_smallest_id() -> None:
    twins = [make_trace(trace_id=f"kp:trace:{name}") for name in ("b", "a", "c")]
    result = curate(twins, embedder=HashingEmbedder(), similarity=0.99)
    assert [t.id for t in result.kept] == ["kp:trace:a"]
    (group,) = result.groups
    assert [d.id for d in group.duplicates] == ["kp:trace:b", "kp:trace:c"]
    assert "2 tie(s) on value broken by id" in group.reason


def test_what_a_knowledge_base_holds_counts_as_seen(tmp_path: Path) -> None:
    traces = pile()
    identity = EmbeddingIdentity(model="hashing", dimensions=384)
    with open_knowledge_base(tmp_path / "kb.sqlite", identity) as kb:
        kp.Scorer(embedder=HashingEmbedder(), memory=kb).score_many(traces[:2])  # task 0
        result = curate(traces, embedder=HashingEmbedder(), similarity=0.8, kb=kb)
    assert not any(t.id.startswith("kp:trace:task0") for t in result.kept)
    stored = [g for g in result.groups if g.stored]
    assert {g.kept for g in stored} <= {"kp:trace:task0-try0", "kp:trace:task0-try1"}
    assert all(g.reason.startswith("already in the knowledge base") for g in stored)


def test_similarity_must_be_a_cosine() -> None:
    with pytest.raises(ValueError, match=r"similarity must be in \(0, 1\]"):
        curate(pile(), embedder=HashingEmbedder(), similarity=0.0)


def test_kp_curate_writes_kept_traces_and_groups(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledgepulse import embedding

    monkeypatch.setattr(
        embedding,
        "choose_embedder",
        lambda *a, **k: embedding.EmbedderChoice(
            embedding.check_embedder(HashingEmbedder()), "onnx", "a test embedder"
        ),
    )
    source = tmp_path / "pile.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in pile()) + "{broken\n")
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    code = main(
        ["curate", str(source), "-o", str(kept), "--groups", str(groups), "--similarity", "0.8"]
    )
    _, err = capsys.readouterr()
    assert code == 1  # the broken line
    assert "records in: 19 = processed 18 + rejected 1" in err
    assert "traces: 18   kept 6   dropped 12 as near-duplicates (cosine ≥ 0.8) in 6 groups" in err
    assert len(kept.read_text().splitlines()) == 6
    lines = [json.loads(line) for line in groups.read_text().splitlines()]
    assert {tuple(sorted(line)) for line in lines} == {("duplicates", "kept", "reason")}
    assert sum(len(line["duplicates"]) for line in lines) == 12


class _Remembering:
    """Embeds each distinct text once: shuffled runs reuse the vectors of the first."""

    def __init__(self, embedder: Any) -> None:
        self.inner, self.name, self.dimensions = embedder, embedder.name, embedder.dimensions
        self.seen: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        missing = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if missing:
            self.seen.update(zip(missing, self.inner.embed(missing)))
        return np.stack([self.seen[t] for t in texts])


@pytest.mark.embedder
@pytest.mark.slow
@pytest.mark.skipif(not TAU.exists(), reason="the tau-bench corpus is not beside the repository")
def test_tau_bench_keeps_a_few_attempts_per_task_whatever_the_order() -> None:
    from knowledgepulse.embedding import EmbedderUnavailable, select_embedder
    from knowledgepulse.importers import from_openai

    try:
        embedder = _Remembering(select_embedder("onnx"))
    except EmbedderUnavailable as exc:
        pytest.skip(str(exc))
    records = load_tau_bench()
    traces = [trace for record in records for trace in from_openai(record)]
    reference = curate(traces, embedder=embedder, similarity=0.9)
    for seed in range(10):
        shuffled = traces[:]
        random.Random(seed).shuffle(shuffled)
        again = curate(shuffled, embedder=embedder, similarity=0.9)
        assert {t.id for t in again.kept} == {t.id for t in reference.kept}
    dropped = {d.id for g in reference.groups for d in g.duplicates}
    kept = {t.id for t in reference.kept}
    assert len(dropped) + len(kept) == 200
    assert all(g.kept in kept for g in reference.groups if not g.stored)
