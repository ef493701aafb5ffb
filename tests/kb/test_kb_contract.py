"""The knowledge-base contract: every backend (SQLite, PostgreSQL) passes these same tests.

The backend comes from the ``kb_location`` fixture in ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pytest

import knowledgepulse as kp
from _helpers import HashingEmbedder, approx_float, make_trace, score_record
from knowledgepulse.kb import (
    EmbeddingIdentity,
    KnowledgeBase,
    KnowledgeBaseError,
    KnowledgeBaseMismatchError,
    StoredBatch,
    StoredTrace,
    Viewer,
    open_knowledge_base,
)
from knowledgepulse.kb._sql import SQLKnowledgeBase
from knowledgepulse.records import ScoreRecord

IDENTITY = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")


def traces(n: int, prefix: str = "kp:trace:") -> list[dict[str, object]]:
    return [
        make_trace(
            trace_id=f"{prefix}{i}",
            objective=f"task {i}: {' '.join(f'w{i}x{k}' for k in range(8))}",
        )
        for i in range(n)
    ]


def unit(seed: int, dims: int = 384) -> npt.NDArray[np.float32]:
    row = np.random.default_rng(seed).normal(size=dims).astype(np.float32)
    normalised: npt.NDArray[np.float32] = row / np.linalg.norm(row)
    return normalised


def test_a_new_base_takes_the_identity_and_refuses_another(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        assert kb.identity == IDENTITY and len(kb) == 0
    other = EmbeddingIdentity(model="hashing", dimensions=384, windowing="first_window")
    with pytest.raises(
        KnowledgeBaseMismatchError, match=r"made with hashing \(384 dimensions, whole\)"
    ):
        open_knowledge_base(kb_location, other)
    with open_knowledge_base(kb_location) as kb:  # no identity: open for reading
        assert kb.identity == IDENTITY


def test_the_base_records_which_embedders_made_its_vectors(
    kb_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Vectors of one model from another runtime or precision are accepted, never silently:
    the base lists every embedder that wrote into it, and the run that adds one is told."""
    onnx = EmbeddingIdentity("m", 384, "whole", ("m (onnx fp32)",))
    bf16 = EmbeddingIdentity("m", 384, "whole", ("m (openvino bf16)",))
    with open_knowledge_base(kb_location, onnx) as kb:
        assert kb.identity is not None and kb.identity.embedders == ("m (onnx fp32)",)
    with caplog.at_level("WARNING", logger="knowledgepulse"):
        with open_knowledge_base(kb_location, onnx):
            pass
        assert caplog.records == []  # the same embedder again: nothing to say
        with open_knowledge_base(kb_location, bf16) as kb:
            assert kb.identity is not None
            assert kb.identity.embedders == ("m (onnx fp32)", "m (openvino bf16)")
    assert [r.getMessage() for r in caplog.records] == [
        f"{kb.location}: its vectors were made by m (onnx fp32); this run adds vectors made "
        "by m (openvino bf16) (the same model in another runtime or precision: similarities "
        "across them differ by up to ~1e-4)"
    ]
    with open_knowledge_base(kb_location) as kb:
        assert kb.stats().to_dict()["embedders"] == ["m (onnx fp32)", "m (openvino bf16)"]


def test_nearest_then_add_sees_stored_and_earlier_rows(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        first = kb.nearest_then_add_many(np.stack([unit(1), unit(2)]), ["a", "b"])
        assert first[0] is None
        assert first[1] is not None and first[1].id == "a"
        again = kb.nearest_then_add_many(np.stack([unit(2), unit(3)]), ["b2", "c"])
        assert again[0] == kp.Nearest("b", approx_float(1.0, abs=1e-5))
        assert again[1] is not None and again[1].id in {"a", "b", "b2"}
        assert len(kb) == 4


def test_admit_decides_what_is_stored(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        seen: list[tuple[int, object]] = []

        def admit(i: int, nearest: kp.Nearest | None) -> object | None:
            seen.append((i, nearest))
            if i == 1:
                return None
            return StoredTrace(id=f"t{i}", trace={"i": i}, vector=unit(10 + i))

        found = kb.nearest_then_add_many(
            np.stack([unit(10), unit(11), unit(10)]), ["t0", "t1", "t2"], admit
        )
        assert [i for i, _ in seen] == [0, 1, 2]
        assert found[2] is not None and (found[2].id, round(found[2].similarity, 5)) == ("t0", 1.0)
        assert len(kb) == 2 and kb.get("t1") is None
        stored = kb.get("t2")
        assert stored is not None and stored.trace == {"i": 2}


def test_the_base_answers_which_rows_this_call_stored(kb_location: str) -> None:
    """An admitted row whose id the base holds, or an earlier row of the batch took, is
    skipped, and the answer says so: the caller need not read the row back to know."""

    def admit(i: int, nearest: kp.Nearest | None) -> object:
        return StoredTrace(id=["held", "new", "new"][i], trace={"i": i}, vector=unit(20 + i))

    with open_knowledge_base(kb_location, IDENTITY) as kb:
        kb.add_many([StoredTrace(id="held", trace={"i": -1}, vector=unit(19))])
        answer = kb.nearest_then_store_many(
            np.stack([unit(20), unit(21), unit(22)]), ["held", "new", "new"], admit
        )
        assert answer.stored == frozenset({1})
        assert [n is not None for n in answer.nearest] == [True, True, True]
        assert len(kb) == 2
        held, new = kb.get("held"), kb.get("new")
        assert held is not None and held.trace == {"i": -1}
        assert new is not None and new.trace == {"i": 1}


class _StoredMeanwhile:
    """The base, with another writer storing ``trace_id`` (under a score of 0.42) just before
    this scorer's turn to store: what a concurrent ``kp score --kb`` or request does."""

    def __init__(self, kb: KnowledgeBase, trace_id: str) -> None:
        self.kb = kb
        self.trace_id = trace_id
        self.dimensions = kb.dimensions

    def nearest_then_add_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Any = None
    ) -> list[kp.Nearest | None]:
        raise AssertionError("a scorer over a knowledge base asks which rows it stored")

    def nearest_then_store_many(
        self, vectors: Any, ids: Sequence[str | None], admit: Any = None
    ) -> StoredBatch:
        other = StoredTrace(
            id=self.trace_id, trace={}, vector=unit(99), record=score_record(self.trace_id, 0.42)
        )
        assert self.kb.add_many([other]) == 1
        return self.kb.nearest_then_store_many(vectors, ids, admit)

    def stored_records(self, ids: Iterable[str]) -> dict[str, ScoreRecord | None]:
        return self.kb.stored_records(ids)

    def clear(self) -> None:
        self.kb.clear()


def test_a_row_another_writer_stored_first_is_answered_from_the_base(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        memory = _StoredMeanwhile(kb, "kp:trace:1")
        scores = kp.Scorer(embedder=HashingEmbedder(), memory=memory).score_many(traces(2))
        assert [s.stored for s in scores] == ["added", "already_stored"]
        assert scores[1].value == 0.42  # the stored score, not this run's
        assert scores[0].value != 0.42
        assert len(kb) == 2


def test_a_record_that_does_not_read_is_read_as_none_and_logged(
    kb_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An old or hand-edited row: every read answers without its score (the log names the row
    and the field) and its bytes stay as they are."""
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        kp.Scorer(embedder=HashingEmbedder(), memory=kb).score_many(traces(1))
        base = cast(SQLKnowledgeBase, kb)
        mark, json_out = base.dialect.mark, base.dialect.json_out
        edit = f"UPDATE traces SET record = {mark} WHERE id = {mark}"
        base._write_rows([(edit, [json_out(HAND_EDITED), "kp:trace:0"])])
        caplog.clear()
        stored = kb.get("kp:trace:0")
        assert stored is not None and stored.record is None and stored.value is None
        assert kb.stored_records(["kp:trace:0"]) == {"kp:trace:0": None}
        assert [row.record for row in kb.list_traces(ALL)[0]] == [None]
        said = {r.getMessage() for r in caplog.records}
        assert said == {
            f"{kb.location}: kp:trace:0: its score record does not read (score: Input should "
            "be less than or equal to 1); read as none"
        }
        raw = base._select("SELECT record FROM traces")[0][0]
        assert base.dialect.json_in(raw) == HAND_EDITED
        # Scoring it again answers without reading it: the row is held, so it is not stored.
        again = kp.Scorer(embedder=HashingEmbedder(), memory=kb).score_many(traces(1))
        assert again[0].stored == "not_added" and len(kb) == 1


ALL = Viewer("admin", None, sees_all=True)
HAND_EDITED = {**score_record("kp:trace:0", 0.5).to_dict(), "score": 2}


def test_scoring_twice_adds_nothing_and_new_ids_find_their_originals(kb_location: str) -> None:
    embedder = HashingEmbedder()
    batch = traces(12)
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        first = kp.Scorer(embedder=embedder, memory=kb).score_many(batch)
        assert [s.stored for s in first] == ["added"] * 12
        assert len(kb) == 12
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        calls = embedder.calls
        second = kp.Scorer(embedder=embedder, memory=kb).score_many(batch)
        assert embedder.calls == calls  # stored traces are not embedded again
        assert [s.stored for s in second] == ["already_stored"] * 12
        assert [s.value for s in second] == [s.value for s in first]
        assert len(kb) == 12
    renamed = [dict(t, id=f"{t['id']}-again") for t in batch]
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        third = kp.Scorer(embedder=embedder, memory=kb).score_many(renamed)
        for original, score in zip(batch, third):
            assert score.nearest is not None and score.nearest.id == original["id"]
            assert score.novelty == pytest.approx(0.0, abs=1e-5)
            assert f"an exact copy of {original['id']}" in score.explanation
            assert score.copy_of is not None and score.copy_of.relation == "exact"
        assert len(kb) == 24


def test_remember_accepted_stores_only_what_passes(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        scorer = kp.Scorer(
            embedder=HashingEmbedder(), memory=kb, remember="accepted", threshold=0.6
        )
        scores = scorer.score_many(traces(6) + traces(6, prefix="kp:trace:copy-"))
        added = [s.trace_id for s in scores if s.stored == "added"]
        assert added == [s.trace_id for s in scores if s.value >= 0.6]
        assert len(kb) == len(added)
        assert all(s.stored == "not_added" for s in scores[6:])  # copies: novelty 0


def test_reading_a_base(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        kp.Scorer(embedder=HashingEmbedder(), memory=kb).score_many(traces(5))
        stored = kb.get("kp:trace:3")
        assert stored is not None and stored.trace["id"] == "kp:trace:3"
        assert stored.record is not None and stored.record.id == "kp:trace:3"
        assert stored.vector.shape == (384,)
        hits = kb.search(stored.vector, 3)
        assert hits[0] == kp.kb.Hit("kp:trace:3", approx_float(1.0, abs=1e-5))
        assert [h.id for h in kb.similar("kp:trace:3", 2)] != [] and "kp:trace:3" not in [
            h.id for h in kb.similar("kp:trace:3", 2)
        ]
        assert [t.id for t in kb.iter_stored()] == [f"kp:trace:{i}" for i in range(5)]
        stats = kb.stats()
        assert (stats.traces, stats.by_domain, stats.identity) == (5, {"code-review": 5}, IDENTITY)
        assert kb.check() == []
        assert kb.stored_records(["kp:trace:1", "nope"]).keys() == {"kp:trace:1"}


def test_add_many_is_idempotent(kb_location: str) -> None:
    items = [StoredTrace(id=f"x{i}", trace={"n": i}, vector=unit(i)) for i in range(4)]
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        assert kb.add_many(items) == 4
        assert kb.add_many(items) == 0
        assert len(kb) == 4


def test_a_stored_trace_comes_back_as_it_was_written(kb_location: str) -> None:
    trace = {"z": 1, "a": {"y": "\u0000 nul", "b": [3, 2, 1]}, "m": "é"}
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        kb.add_many([StoredTrace(id="k", trace=trace, vector=unit(5))])
        stored = kb.get("k")
    assert stored is not None
    assert list(stored.trace) == ["z", "a", "m"] and stored.trace == trace


def test_a_base_offers_the_knowledge_base_protocol_and_nothing_else_public(
    kb_location: str,
) -> None:
    """What ``open_knowledge_base`` is typed to return is what each backend offers: a method
    added to one backend only, or left out of the protocol, fails here."""
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        offered = {name for name in dir(kb) if not name.startswith("_")}
    # The SQL frame's dialect and full-text engine, the location given.
    backend_own = {"dialect", "text_engine", "path", "url"}
    assert offered - backend_own == {name for name in dir(KnowledgeBase) if name[0] != "_"}


def test_an_unknown_index_mode_is_refused_before_anything_is_made(kb_location: str) -> None:
    with pytest.raises(ValueError, match=r"^index mode must be auto, exact or ann; got 'fast'$"):
        open_knowledge_base(kb_location, IDENTITY, index="fast")
    with pytest.raises(KnowledgeBaseError, match=r"no such knowledge base$"):
        open_knowledge_base(kb_location, create=False)


def test_reads_page_through_a_base_larger_than_a_page(kb_location: str) -> None:
    """``iter_stored`` reads 1,000 rows at a time and ``stored_records`` asks 500 ids at a
    time: every row comes back once, in insertion order, as it was written."""
    n = 2_345
    items = [
        StoredTrace(
            id=f"p{i:05d}",
            trace={"n": i},
            vector=unit(i, 8),
            record=None if i % 3 else score_record(f"p{i:05d}", i / n),
            added_at=f"2026-01-01T00:00:{i % 60:02d}.{i % 1000:03d}Z",
        )
        for i in range(n)
    ]
    with open_knowledge_base(kb_location, EmbeddingIdentity("m", 8, "whole")) as kb:
        assert kb.add_many(items[: n // 2]) == n // 2
        assert kb.add_many(items) == n - n // 2
        back = list(kb.iter_stored())
        records = kb.stored_records([item.id for item in reversed(items)] + ["absent"])
    assert [t.id for t in back] == [item.id for item in items]
    assert all(np.array_equal(t.vector, item.vector) for t, item in zip(back, items))
    assert [(t.trace, t.record, t.added_at) for t in back] == [
        (item.trace, item.record, item.added_at) for item in items
    ]
    assert records == {item.id: item.record for item in items}
