"""Faults on Ray (a killed worker, a bad record, a worker without the model) and the API."""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from _helpers import HashingEmbedder
from knowledgepulse.records import ScoreRecord

from ._corpus import write_corpus


class SlowHashing(HashingEmbedder):
    """The hashing embedder, slow enough that a run is still going when a worker is killed."""

    name = "SlowHashing"  # as the class was named before the hashing embedder had a name

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        time.sleep(0.02)
        return super().embed(texts)


def corpus_traces(path: Path) -> list[dict[str, Any]]:
    traces = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if isinstance(data, dict) and "steps" in data:
            traces.append(data)
    return traces


@pytest.mark.slow
@pytest.mark.usefixtures("ray_session")
def test_a_killed_worker_is_restarted_and_the_output_is_complete(corpus_5000: Path) -> None:
    from knowledgepulse.distributed import RayScorer

    traces = corpus_traces(corpus_5000)[:3000]
    local = kp.Scorer(embedder=HashingEmbedder()).score_many(traces)
    with RayScorer(SlowHashing, workers=2, chunk_size=256) as scorer:
        stream = scorer.iter_scores(traces)
        scores = [next(stream)]
        victim = scorer.pool.actors[1]
        os.kill(kp.distributed.import_ray().get(victim.pid.remote()), signal.SIGKILL)
        scores.extend(stream)
        restarted = kp.distributed.import_ray().get(victim.pid.remote(), timeout=60)
    assert restarted > 0
    assert scores == local


@pytest.mark.usefixtures("ray_session")
def test_window_smaller_chunks_than_the_window(tmp_path: Path) -> None:
    """Chunks of 192 traces: each sees the vectors of the six chunks before it."""
    from knowledgepulse.distributed import RayScorer

    traces = corpus_traces(write_corpus(tmp_path / "c.jsonl", 1500, seed=9))
    local = kp.Scorer(embedder=HashingEmbedder(), batch_size=32).score_many(traces)
    with RayScorer(HashingEmbedder, workers=2, batch_size=32, chunk_size=190) as scorer:
        assert scorer.chunk_size == 192
        assert scorer.score_many(traces) == local


@pytest.mark.usefixtures("ray_session")
def test_a_worker_without_the_model_fails_with_the_local_message(tmp_path: Path) -> None:
    from knowledgepulse.distributed import EmbedPool
    from knowledgepulse.embedding import MiniLMEmbedder

    missing = tmp_path / "no-model-here"
    with pytest.raises(Exception) as local:
        MiniLMEmbedder(model_dir=missing).warm_up()
    with pytest.raises(type(local.value)) as remote:
        EmbedPool(lambda: MiniLMEmbedder(model_dir=missing), workers=1, cpus_per_worker=1)
    assert str(remote.value) == str(local.value)


@pytest.mark.usefixtures("ray_session")
def test_score_dataset_gives_score_lines_and_rejections_in_order() -> None:
    from knowledgepulse.distributed import RayScorer, score_dataset

    ray = kp.distributed.import_ray()
    good = [
        {**kp.ReasoningTrace.model_validate(t).to_dict()}
        for t in corpus_traces(Path("examples/traces.jsonl"))
    ]
    texts = [json.dumps(t) for t in good[:2]] + ['{"id": 1}'] + [json.dumps(t) for t in good[2:]]
    ds = ray.data.from_items([{"text": text} for text in texts])
    with RayScorer(HashingEmbedder, workers=1) as scorer:
        rows = score_dataset(ds, scorer, threshold=0.5).take_all()
    local = kp.Scorer(embedder=HashingEmbedder()).score_many(good)
    expected = [
        ScoreRecord.of(
            score,
            kp.ReasoningTrace.model_validate(trace),
            source="<dataset>",
            line=line,
            threshold=0.5,
        ).to_json()
        for score, trace, line in zip(local, good, [1, 2, *range(4, len(texts) + 1)])
    ]
    assert [row["score"] for row in rows if row["score"]] == expected
    assert [row["score"] is None for row in rows] == [False, False, True] + [False] * (
        len(good) - 2
    )
    rejection = json.loads(rows[2]["rejection"])
    assert (rejection["source"], rejection["line"], rejection["record"]) == (
        "<dataset>",
        3,
        {"id": 1},
    )
