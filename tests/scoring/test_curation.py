"""Order-free curation: the kept set depends on the set of traces, never on their order."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import knowledgepulse as kp
from _helpers import TAU_BENCH, HashingEmbedder, load_tau_bench, make_trace
from knowledgepulse.cli import main
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
from knowledgepulse.scoring._curation import curate

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
    identity = EmbeddingIdentity(model="hashing", dimensions=384, text="trace")
    with open_knowledge_base(tmp_path / "kb.sqlite", identity) as kb:
        kp.Scorer(embedder=HashingEmbedder(), memory=kb, novelty="seed").score_many(
            traces[:2]
        )  # task 0
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
        [
            "curate",
            "--by",
            "embedding",
            str(source),
            "-o",
            str(kept),
            "--groups",
            str(groups),
            "--similarity",
            "0.8",
        ]
    )
    _, err = capsys.readouterr()
    assert code == 1  # the broken line
    assert "records in: 19 = processed 18 + rejected 1" in err
    assert "traces: 18   kept 6   dropped 12 as near-duplicates (cosine ≥ 0.8) in 6 groups" in err
    assert len(kept.read_text().splitlines()) == 6
    lines = [json.loads(line) for line in groups.read_text().splitlines()]
    assert {tuple(sorted(line)) for line in lines} == {("duplicates", "kept", "reason", "schema")}
    assert sum(len(line["duplicates"]) for line in lines) == 12


def test_kp_curate_first_pass_static_proposes_and_minilm_decides(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledgepulse import embedding

    asked: list[str] = []

    def choose(choice: str = "auto", **_: Any) -> Any:
        asked.append(choice)
        return embedding.EmbedderChoice(
            embedding.check_embedder(HashingEmbedder()), "onnx", "a test embedder"
        )

    monkeypatch.setattr(embedding, "choose_embedder", choose)
    source = tmp_path / "pile.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in pile()))
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    argv = ["curate", "--by", "embedding", str(source), "-o", str(kept), "--groups", str(groups)]
    argv += ["--similarity", "0.8", "--first-pass", "static", "--candidate-similarity", "0.8"]
    assert main(argv) == 0
    _, err = capsys.readouterr()
    assert asked == ["auto", "static"]
    assert "traces: 18   kept 6   dropped 12 as near-duplicates (cosine ≥ 0.8) in 6 groups" in err
    assert (
        "first pass: 20 candidate pairs (static cosine ≥ 0.8); HashingEmbedder decided them, "
        "embedding 18 of 18 traces" in err
    )
    assert not (tmp_path / ".kept.jsonl.kp-curate").exists()  # streamed, and cleaned up


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--first-pass", "static", "--kb", "kb.sqlite"], "does not combine with --kb"),
        (["--candidate-similarity", "0.9"], "applies to --first-pass static only"),
    ],
)
def test_kp_curate_first_pass_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    source = tmp_path / "pile.jsonl"
    source.write_text("".join(json.dumps(t) + "\n" for t in pile()))
    argv = [
        "curate",
        "--by",
        "embedding",
        str(source),
        "-o",
        str(tmp_path / "k"),
        "--groups",
        str(tmp_path / "g"),
    ]
    assert main(argv + extra) == 2
    assert message in capsys.readouterr().err


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
    reference = curate(traces, embedder=embedder)
    for seed in range(10):
        shuffled = traces[:]
        random.Random(seed).shuffle(shuffled)
        again = curate(shuffled, embedder=embedder)
        assert {t.id for t in again.kept} == {t.id for t in reference.kept}
    dropped = {d.id for g in reference.groups for d in g.duplicates}
    kept = {t.id for t in reference.kept}
    assert len(dropped) + len(kept) == 200
    assert all(g.kept in kept for g in reference.groups if not g.stored)
    # Groups hold together: at the default threshold the pairs grouped together are attempts
    # of the same task (measured 0.930; at the old 0.9 it was 0.096, one group of 45).
    task = {t.id: (t.metadata.model_extra or {})["kp_import"]["task"] for t in traces}
    pairs = [
        (a, b)
        for g in reference.groups
        for a, b in itertools.combinations([g.kept, *(d.id for d in g.duplicates)], 2)
    ]
    precision = sum(task[a] == task[b] for a, b in pairs) / len(pairs)
    assert precision >= 0.9
    assert max(len(g.duplicates) + 1 for g in reference.groups) <= 5


class _TableEmbedder:
    """Each text's vector looked up in a table: curation's geometry chosen by the test."""

    name = "table"

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = table
        self.dimensions = len(next(iter(table.values())))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        rows = np.asarray([self.table[t] for t in texts], dtype=np.float32)
        normalised: npt.NDArray[np.float32] = rows / np.linalg.norm(rows, axis=1, keepdims=True)
        return normalised


def _pile_of_vectors(vectors: list[list[float]], confidences: list[float]) -> tuple[list[Any], Any]:
    traces = [
        kp.parse_trace(
            make_trace(
                trace_id=f"kp:trace:v{i:02d}",
                objective=f"objective v{i:02d}",
                confidence=confidences[i % len(confidences)],
            )
        )
        for i in range(len(vectors))
    ]
    table = {t.embedding_text: np.asarray(v, dtype=np.float32) for t, v in zip(traces, vectors)}
    return traces, _TableEmbedder(table)


_coordinate = st.floats(-1.0, 1.0, allow_nan=False).map(lambda x: round(x, 2))
_vector = st.lists(_coordinate, min_size=3, max_size=3).filter(
    lambda v: sum(x * x for x in v) > 0.05
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    vectors=st.lists(_vector, min_size=2, max_size=24),
    confidences=st.lists(st.sampled_from([0.5, 0.6, 0.7]), min_size=1, max_size=4),
    similarity=st.sampled_from([0.8, 0.9, 0.95]),
    seed=st.integers(0, 2**16),
)
def test_groups_hold_together_whatever_the_order(
    vectors: list[list[float]], confidences: list[float], similarity: float, seed: int
) -> None:
    """No chaining: every dropped trace is within the threshold of its kept trace, and the
    similarity written for it is that cosine; kept traces are never within the threshold of
    each other; every trace is kept or dropped once; a shuffled pile gives the same groups."""
    traces, embedder = _pile_of_vectors(vectors, confidences)
    unit = {t.id: embedder.embed([t.embedding_text])[0].astype(np.float64) for t in traces}
    result = curate(traces, embedder=embedder, similarity=similarity)
    kept = [t.id for t in result.kept]
    dropped = [d.id for g in result.groups for d in g.duplicates]
    assert sorted(kept + dropped) == sorted(t.id for t in traces)
    for group in result.groups:
        for duplicate in group.duplicates:
            cosine = float(unit[group.kept] @ unit[duplicate.id])
            assert duplicate.similarity == pytest.approx(cosine, abs=1e-5)
            assert cosine >= similarity - 1e-5
    for a, b in itertools.combinations(kept, 2):
        assert float(unit[a] @ unit[b]) < similarity + 1e-5
    shuffled = traces[:]
    random.Random(seed).shuffle(shuffled)
    again = curate(shuffled, embedder=embedder, similarity=similarity)
    assert [g.to_dict() for g in again.groups] == [g.to_dict() for g in result.groups]
    assert {t.id for t in again.kept} == set(kept)


def test_a_chain_of_similar_pairs_does_not_join_its_ends() -> None:
    """Four vectors 15° apart in a row: neighbours are at cosine 0.966, two steps at 0.866.
    Connected components at 0.95 would put all four in one group; the best trace (v00) takes
    only v01, and v02 leads its own group with v03."""
    angle = np.deg2rad(15.0)
    vectors = [[np.cos(k * angle), np.sin(k * angle), 0.0] for k in range(4)]
    traces, embedder = _pile_of_vectors(vectors, [0.9, 0.5, 0.5, 0.5])
    result = curate(traces, embedder=embedder, similarity=0.95)
    assert sorted(t.id for t in result.kept) == ["kp:trace:v00", "kp:trace:v02"]
    assert [(g.kept, [d.id for d in g.duplicates]) for g in result.groups] == [
        ("kp:trace:v00", ["kp:trace:v01"]),
        ("kp:trace:v02", ["kp:trace:v03"]),
    ]
    assert [d.similarity for g in result.groups for d in g.duplicates] == pytest.approx(
        [np.cos(angle)] * 2, abs=1e-6
    )


def test_the_default_threshold_is_the_measured_one() -> None:
    from knowledgepulse.scoring._curation import DEFAULT_SIMILARITY

    assert DEFAULT_SIMILARITY == 0.95


class _Counting:
    """An embedder that counts the texts it embeds (the tiered path embeds only candidates)."""

    def __init__(self, wrapped: Any) -> None:
        self.wrapped = wrapped
        self.dimensions = wrapped.dimensions
        self.name = "counting"
        self.texts = 0

    def embed(self, texts: Any) -> np.ndarray:
        self.texts += len(texts)
        return self.wrapped.embed(texts)  # type: ignore[no-any-return]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    vectors=st.lists(_vector, min_size=2, max_size=20),
    noise=st.lists(_vector, min_size=2, max_size=20),
    similarity=st.sampled_from([0.8, 0.9, 0.95]),
    seed=st.integers(0, 2**16),
)
def test_a_first_pass_that_misses_no_pair_gives_the_same_groups(
    vectors: list[list[float]], noise: list[list[float]], similarity: float, seed: int
) -> None:
    """Candidates from any cheap vectors, with a threshold low enough to propose every pair,
    give exactly the groups of the one-tier run; with the strong vectors themselves as the
    first pass at the same threshold, too."""
    traces, strong = _pile_of_vectors(vectors, [0.5, 0.6])
    cheap = _TableEmbedder(
        {
            t.embedding_text: np.asarray(noise[i % len(noise)], dtype=np.float32)
            for i, t in enumerate(traces)
        }
    )
    reference = curate(traces, embedder=strong, similarity=similarity)
    expected = [g.to_dict() for g in reference.groups]
    shuffled = traces[:]
    random.Random(seed).shuffle(shuffled)
    everything = curate(
        shuffled,
        embedder=strong,
        similarity=similarity,
        first_pass=cheap,
        candidate_similarity=-1.0,
    )
    assert [g.to_dict() for g in everything.groups] == expected
    assert everything.embedded == len(traces)
    assert everything.candidate_pairs == len(traces) * (len(traces) - 1) // 2
    itself = curate(
        shuffled,
        embedder=strong,
        similarity=similarity,
        first_pass=strong,
        candidate_similarity=similarity - 1e-5,
    )
    assert [g.to_dict() for g in itself.groups] == expected
    assert {t.id for t in itself.kept} == {t.id for t in reference.kept}


def test_only_traces_in_a_candidate_pair_are_embedded_by_the_strong_embedder() -> None:
    # v00/v01 close in both spaces; v02 and v03 far from everything in the cheap space.
    vectors = [[1.0, 0.0, 0.0], [0.99, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    traces, table = _pile_of_vectors(vectors, [0.9, 0.5, 0.5, 0.5])
    strong = _Counting(table)
    result = curate(
        traces, embedder=strong, similarity=0.95, first_pass=table, candidate_similarity=0.9
    )
    assert strong.texts == 2
    assert (result.candidate_pairs, result.embedded) == (1, 2)
    assert sorted(t.id for t in result.kept) == ["kp:trace:v00", "kp:trace:v02", "kp:trace:v03"]
    assert [(g.kept, [d.id for d in g.duplicates]) for g in result.groups] == [
        ("kp:trace:v00", ["kp:trace:v01"])
    ]


def test_a_first_pass_does_not_combine_with_a_knowledge_base(tmp_path: Path) -> None:
    embedder = HashingEmbedder()
    identity = EmbeddingIdentity(model="hashing", dimensions=384)
    with (
        open_knowledge_base(tmp_path / "kb.sqlite", identity) as kb,
        pytest.raises(ValueError, match="does not combine with a knowledge base"),
    ):
        curate(pile(), embedder=embedder, kb=kb, first_pass=embedder)


def test_groups_lines_are_group_records_with_a_schema(capsys: pytest.CaptureFixture[str]) -> None:
    """kp curate --groups writes one knowledgepulse.groups/1 record per line, and kp schema
    groups prints its JSON Schema."""
    from jsonschema import validate

    from knowledgepulse.records import GroupRecord, json_schema

    traces = [make_trace(trace_id=f"kp:trace:{i}") for i in range(3)]
    result = curate(traces, embedder=HashingEmbedder())
    line = result.groups[0].to_dict()
    assert list(line)[:2] == ["schema", "kept"]
    assert line["schema"] == "knowledgepulse.groups/1"
    validate(line, json_schema("groups"))
    assert GroupRecord.model_validate(line).kept == result.groups[0].kept
    assert main(["schema", "groups"]) == 0
    assert json.loads(capsys.readouterr().out) == json_schema("groups")


def test_curate_takes_profiles_like_score(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "curate",
            "--by",
            "embedding",
            "examples/traces.jsonl",
            "-o",
            str(tmp_path / "kept.jsonl"),
            "--groups",
            str(tmp_path / "groups.jsonl"),
            "--profiles",
            str(tmp_path / "missing.toml"),
        ]
    )
    assert code == 2
    assert f"no such profiles file: {tmp_path / 'missing.toml'}" in capsys.readouterr().err
