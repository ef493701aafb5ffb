"""Streaming ``kp curate``: the decisions of ``curate()`` with memory bounded and a work dir
that survives a stop."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from _helpers import CoarseEmbedder, HashingEmbedder, make_trace, synthetic
from knowledgepulse.io._writers import dumps
from knowledgepulse.kb import EmbeddingIdentity, open_knowledge_base
from knowledgepulse.scoring._curation import curate
from knowledgepulse.scoring._nearby import near_lists
from knowledgepulse.scoring._stream_curation import StreamingCuration

CHILD = Path(__file__).with_name("curate_child.py")


def streamed(
    traces: Sequence[Any], work: Path, similarity: float, embedder: Any = None, **settings: Any
) -> tuple[list[str], list[str]]:
    """The kept lines and group lines of a streaming curation."""
    curation = StreamingCuration(
        work, embedder=embedder or HashingEmbedder(), similarity=similarity, **settings
    )
    for trace in traces:
        curation.add(kp.parse_trace(trace))
    curation.finish_reading()
    curation.decide()
    kept: list[str] = []
    groups: list[str] = []
    curation.write(kept.append, groups.append)
    curation.close()
    return kept, groups


def in_memory(
    traces: Sequence[Any], similarity: float, **settings: Any
) -> tuple[list[str], list[str]]:
    result = curate(
        traces,
        embedder=settings.pop("embedder", HashingEmbedder()),
        similarity=similarity,
        **settings,
    )
    return [t.to_json() for t in result.kept], [dumps(g.to_dict()) for g in result.groups]


@pytest.mark.parametrize("similarity", [0.8, 0.9])
def test_streaming_equals_curate_on_2000_traces_in_any_order(
    tmp_path: Path, similarity: float
) -> None:
    traces = synthetic(2000)
    reference = in_memory(traces, similarity)
    assert streamed(traces, tmp_path / "a", similarity) == reference
    shuffled = traces[:]
    random.Random(3).shuffle(shuffled)
    kept, groups = streamed(shuffled, tmp_path / "b", similarity)
    assert groups == reference[1]
    assert sorted(kept) == sorted(reference[0])
    order = [t["id"] for t in shuffled]
    assert [json.loads(line)["id"] for line in kept] == [
        i for i in order if i in {json.loads(line)["id"] for line in kept}
    ]


@pytest.mark.parametrize("ann_from", [50_000, 500])
def test_a_streaming_first_pass_decides_as_curate_does(tmp_path: Path, ann_from: int) -> None:
    traces = synthetic(2000, seed=3)
    settings: dict[str, Any] = {"first_pass": CoarseEmbedder(), "candidate_similarity": 0.88}
    expected = in_memory(traces, 0.9, **settings)
    decider = HashingEmbedder()
    work = tmp_path / "work"
    curation = StreamingCuration(
        work, embedder=decider, similarity=0.9, ann_from=ann_from, **settings
    )
    for trace in reversed(traces):
        curation.add(kp.parse_trace(trace))
    curation.finish_reading()
    phases: list[str] = []
    curation.decide(progress=lambda done, total, phase: phases.append(phase))
    kept: list[str] = []
    groups: list[str] = []
    curation.write(kept.append, groups.append)
    curation.close()
    assert sorted(kept) == sorted(expected[0])
    assert groups == expected[1]
    assert curation.candidate_pairs > 0
    # The decider embedded only traces the walk asked about: fewer than the pile.
    assert 0 < curation.decided_embedded < len(traces)
    assert curation.decider_spool is not None
    assert curation.decider_spool.size == curation.decided_embedded
    assert phases[0] == "search" and phases[-1] == "decide"


def test_the_deciders_vectors_are_kept_for_the_next_run_of_the_work_dir(tmp_path: Path) -> None:
    traces = synthetic(400, seed=5)
    settings: dict[str, Any] = {"first_pass": CoarseEmbedder(), "candidate_similarity": 0.88}
    runs = []
    for _ in range(2):  # the same work dir, as after a stop (scratch files discarded)
        curation = StreamingCuration(
            tmp_path / "work", embedder=HashingEmbedder(), similarity=0.9, **settings
        )
        for trace in traces:
            curation.add(kp.parse_trace(trace))
        curation.finish_reading()
        curation.decide()
        kept: list[str] = []
        curation.write(kept.append, lambda line: None)
        curation.close()
        curation.discard_scratch()
        runs.append((kept, curation.decided_embedded, curation.decided_reused, curation.reused))
    (kept_first, made, reused_first, _), (kept_second, made_again, reused, first_pass_reused) = runs
    assert kept_second == kept_first
    assert made > 0 and reused_first == 0
    # Nothing embedded again; reused counts traces (two traces of one text share a vector).
    assert (made_again, first_pass_reused) == (0, len(traces))
    assert made <= reused <= len(traces)


def test_hnsw_lists_give_the_same_decisions_as_exact_blocks(tmp_path: Path) -> None:
    traces = synthetic(2000, seed=5)
    assert streamed(traces, tmp_path / "ann", 0.8, ann_from=100) == in_memory(traces, 0.8)


def test_the_hnsw_lists_are_the_same_in_every_run(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    base = rng.standard_normal((300, 32)).astype(np.float32)
    rows = np.repeat(base, 10, axis=0) + 0.05 * rng.standard_normal((3000, 32)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    lists = []
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        found = near_lists(rows, 0.95, tmp_path / name, ann_from=0)
        lists.append([found.of(p) for p in range(len(rows))])
    assert lists[0] == lists[1]
    exact = near_lists(rows, 0.95, tmp_path, ann_from=10**9)
    assert lists[0] == [exact.of(p) for p in range(len(rows))]


class _Table:
    """Each text's vector looked up in a table: the geometry chosen by the test."""

    name = "table"

    def __init__(self, table: dict[str, npt.NDArray[np.float32]]) -> None:
        self.table = table
        self.dimensions = len(next(iter(table.values())))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.asarray([self.table[t] for t in texts], dtype=np.float32)


def test_a_chain_of_similar_pairs_does_not_join_its_ends(tmp_path: Path) -> None:
    # a ~ b ~ c ~ d, each pair at cosine ~0.96, a and d far apart: a keeps b only.
    angles = [0.0, 0.28, 0.56, 0.84]
    vectors = [[float(np.cos(t)), float(np.sin(t)), 0.0] for t in angles]
    traces = [
        make_trace(trace_id=f"kp:trace:v{i}", objective=f"objective v{i}", confidence=c)
        for i, c in enumerate([0.9, 0.5, 0.5, 0.5])
    ]
    embedder = _Table(
        {
            kp.parse_trace(t).embedding_text: np.asarray(v, np.float32)
            for t, v in zip(traces, vectors)
        }
    )
    kept, groups = streamed(traces, tmp_path, 0.95, embedder=embedder)
    assert [json.loads(line)["id"] for line in kept] == ["kp:trace:v0", "kp:trace:v2"]
    first = json.loads(groups[0])
    assert first["kept"] == "kp:trace:v0"
    assert [d["id"] for d in first["duplicates"]] == ["kp:trace:v1"]
    # The similarity in the groups file is to the kept trace.
    assert first["duplicates"][0]["similarity"] == round(float(np.cos(0.28)), 6)
    assert (kept, groups) == in_memory(traces, 0.95, embedder=embedder)


def test_a_knowledge_base_counts_as_seen_as_in_curate(tmp_path: Path) -> None:
    traces = synthetic(400, seed=2)
    identity = EmbeddingIdentity(model="hashing", dimensions=384, text="trace")
    with open_knowledge_base(tmp_path / "kb.sqlite", identity) as kb:
        kp.Scorer(embedder=HashingEmbedder(), memory=kb, novelty="seed").score_many(traces[:40])
        reference = in_memory(traces, 0.8, kb=kb)
        assert streamed(traces, tmp_path / "w", 0.8, kb=kb) == reference
    assert any(
        '"stored"' in line or "already in the knowledge base" in line for line in reference[1]
    )


def run_child(
    *args: str, delay: float = 0.0, peak_rss_file: Path | None = None
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "KP_TEST_EMBED_DELAY": str(delay)}
    if peak_rss_file is not None:
        env["KP_TEST_PEAK_RSS_FILE"] = str(peak_rss_file)
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
    )


def write_pile(path: Path, traces: Sequence[Any]) -> None:
    path.write_text("".join(json.dumps(t) + "\n" for t in traces))


def test_kp_curate_streams_to_the_same_files_and_cleans_its_work_dir(tmp_path: Path) -> None:
    traces = synthetic(2000, seed=9)
    source = tmp_path / "pile.jsonl"
    write_pile(source, traces)
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    process = run_child(
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
    )
    _, err = process.communicate(timeout=300)
    assert process.returncode == 0, err.decode()
    reference = in_memory(traces, 0.8)
    assert kept.read_text().splitlines() == reference[0]
    assert groups.read_text().splitlines() == reference[1]
    text = err.decode()
    assert "records in: 2000 = processed 2000 + rejected 0" in text
    assert "took " in text and " traces/s): read " in text and ", write " in text
    assert not (tmp_path / ".kept.jsonl.kp-curate").exists()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_keeps_its_embeddings_for_the_next(tmp_path: Path, sig: int) -> None:
    traces = synthetic(3000, seed=4)
    source = tmp_path / "pile.jsonl"
    write_pile(source, traces)
    kept, groups, work = tmp_path / "kept.jsonl", tmp_path / "g.jsonl", tmp_path / "work"
    args = (
        "curate",
        "--by",
        "embedding",
        str(source),
        "-o",
        str(kept),
        "--groups",
        str(groups),
        "--work-dir",
        str(work),
    )
    process = run_child(*args, "--similarity", "0.8", "--batch-size", "16", delay=0.05)
    vectors = work / "vectors.f32"
    deadline = time.monotonic() + 120
    while (
        not vectors.exists() or vectors.stat().st_size < 50 * 16 * 384 * 4
    ) and time.monotonic() < deadline:
        assert process.poll() is None
        time.sleep(0.02)
    process.send_signal(sig)
    _, err_bytes = process.communicate(timeout=60)
    err = err_bytes.decode()
    assert process.returncode == 128 + sig, err
    assert "records in: " in err and "= processed 0 + rejected 0 + not processed" in err
    assert "interrupted before curating: nothing was written; " in err
    assert f"embeddings are kept in {work} for the next run" in err
    assert not kept.exists() and not groups.exists()
    spooled = vectors.stat().st_size // (384 * 4)
    assert 50 * 16 <= spooled < 3000
    assert not (work / "traces.jsonl").exists()  # scratch files go; vectors stay

    again = run_child(*args, "--similarity", "0.8")
    _, err_bytes = again.communicate(timeout=300)
    err = err_bytes.decode()
    assert again.returncode == 0, err
    assert f"embeddings: {spooled:,} reused from an earlier run, {3000 - spooled:,} made" in err
    assert kept.read_text().splitlines() == in_memory(traces, 0.8)[0]
    assert not work.exists()


#: Peak RSS allowed to kp curate on 10^5 traces (docs/performance.md has the measured figure).
PEAK_RSS_MIB = 512


@pytest.mark.slow
@pytest.mark.parametrize(
    "tiers",
    [[], ["--first-pass", "static", "--candidate-similarity", "0.88"]],
    ids=["one-tier", "first-pass"],
)
def test_kp_curate_on_100k_traces_stays_in_bounded_memory(tmp_path: Path, tiers: list[str]) -> None:
    source = tmp_path / "pile.jsonl"
    with source.open("w") as out:
        for start in range(0, 100_000, 10_000):
            for trace in synthetic(10_000, seed=start)[:]:
                trace["id"] = f"{trace['id']}-{start}"
                out.write(json.dumps(trace) + "\n")
    kept, groups = tmp_path / "kept.jsonl", tmp_path / "groups.jsonl"
    peak_file = tmp_path / "peak-rss-kib"
    process = run_child(
        "curate",
        "--by",
        "embedding",
        str(source),
        "-o",
        str(kept),
        "--groups",
        str(groups),
        "--similarity",
        "0.9",
        *tiers,
        peak_rss_file=peak_file,
    )
    _, err = process.communicate(timeout=3600)
    assert process.returncode == 0, err.decode()
    peak_mib = int(peak_file.read_text()) / 1024  # the child's own ru_maxrss, KiB on Linux
    assert peak_mib < PEAK_RSS_MIB, err.decode()
    assert "records in: 100000 = processed 100000 + rejected 0" in err.decode()
    if tiers:
        assert "first pass: " in err.decode()


def test_texts_repeated_within_a_run_are_embedded_once_and_not_called_reused(
    tmp_path: Path,
) -> None:
    # A fresh work dir holds no earlier run: a text met twice in this run (other ids, same
    # steps) is embedded once, and nothing is "reused from an earlier run".
    from knowledgepulse.scoring._stream_curation import StreamingCuration

    traces = synthetic(40, seed=3)
    copies = [{**trace, "id": f"{trace['id']}-again"} for trace in traces[:10]]
    calls: list[int] = []

    class Counting(HashingEmbedder):
        def embed(self, texts: Any) -> Any:
            calls.append(len(texts))
            return super().embed(texts)

    curation = StreamingCuration(tmp_path / "work", embedder=Counting(), batch_size=64)
    for data in traces + copies:  # one batch: the copies meet their originals inside it
        curation.add(kp.ReasoningTrace.model_validate(data))
    curation.finish_reading()
    assert (curation.embedded, curation.reused, sum(calls)) == (40, 0, 40)
    curation.close()
