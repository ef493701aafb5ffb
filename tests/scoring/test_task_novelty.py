"""The task novelty: novelty by the task's facets (task text, tool-call values, copies),
calibrated; the seed's whole-trace novelty by name; bases of whole-trace vectors migrated."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pytest

import knowledgepulse as kp
from _helpers import HashingEmbedder, make_trace
from knowledgepulse.cli import main
from knowledgepulse.kb import EmbeddingIdentity, KnowledgeBaseMismatchError, open_knowledge_base
from knowledgepulse.tasks import (
    entity_similarity,
    novelty_of_similarity,
    opening_text,
    run_facet,
    task_similarity,
    task_text,
)


def attempt(task: int, attempt: int, user: str | None = None) -> dict[str, object]:
    """An attempt at task ``task``: its words in the objective, a booking tool called with
    the task's user id, and chatter of its own."""
    return make_trace(
        trace_id=f"kp:trace:task{task}-try{attempt}",
        objective=f"please book flight f{task}00 for user u{task} " * 3,
        steps=[
            {"type": "thought", "content": f"attempt {attempt} chatter {attempt * 7} words"},
            {
                "type": "tool_call",
                "tool": {"name": "book"},
                "input": {"user_id": f"U{task}", "flight": f"F{task}00", "seat": attempt},
                "content": "booking",
            },
            {"type": "observation", "content": user or "thanks", "source": "user"},
        ],
    )


def test_calibration_is_linear_between_a_repeat_and_a_new_task() -> None:
    assert novelty_of_similarity(0.95) == 0.0
    assert novelty_of_similarity(0.9) == 0.0
    assert novelty_of_similarity(0.45) == pytest.approx(0.99, abs=1e-12)
    assert novelty_of_similarity(0.2) == 1.0
    assert novelty_of_similarity(0.7) == pytest.approx(0.44, abs=1e-12)


def test_the_values_of_tool_calls_weigh_a_tenth() -> None:
    assert entity_similarity({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert entity_similarity(set(), {"a"}) is None  # a run without values says nothing
    assert task_similarity(0.8, None) == 0.8
    assert task_similarity(0.8, 1.0) == pytest.approx(0.82)
    assert task_similarity(0.8, 0.0) == pytest.approx(0.72)


def test_run_facet_keeps_values_case_folded_and_tools_in_order() -> None:
    facet = run_facet(kp.parse_trace(attempt(3, 1)))
    assert facet.entities == frozenset({"u3", "f300", "1"})
    assert facet.tools == ("book",)


def test_task_text_falls_back_when_there_is_no_objective() -> None:
    trace = kp.parse_trace(attempt(1, 0, user="my real question"))
    blank = trace.model_copy(update={"task": trace.task.model_copy(update={"objective": " "})})
    assert task_text(blank).source == "user"
    assert task_text(blank).text == "my real question"
    # The schema refuses a blank objective; a trace built in code can still lack one.
    words = kp.parse_trace(make_trace(steps=[{"type": "thought", "content": "first words"}]))
    no_user = words.model_copy(update={"task": words.task.model_copy(update={"objective": ""})})
    assert (task_text(no_user).text, task_text(no_user).source) == ("first words", "first_step")
    huge = kp.parse_trace(make_trace(objective="x" * 1_000_000))
    assert len(task_text(huge).text) == 1000


def test_the_opening_is_the_first_user_message_with_the_same_fallbacks() -> None:
    trace = kp.parse_trace(attempt(1, 0, user="my real question"))
    assert opening_text(trace) == type(opening_text(trace))(
        "please book flight f100 for user u1 " * 3, "objective"
    )
    blank = trace.model_copy(update={"task": trace.task.model_copy(update={"objective": " "})})
    assert (opening_text(blank).text, opening_text(blank).source) == ("my real question", "user")
    words = kp.parse_trace(make_trace(steps=[{"type": "thought", "content": "first words"}]))
    no_user = words.model_copy(update={"task": words.task.model_copy(update={"objective": ""})})
    assert (opening_text(no_user).text, opening_text(no_user).source) == (
        "first words",
        "first_step",
    )
    empty = no_user.model_copy(update={"steps": []})
    assert (opening_text(empty).text, opening_text(empty).source) == ("", "none")
    huge = kp.parse_trace(make_trace(objective="x" * 1_000_000))
    assert len(opening_text(huge).text) == 1000


def test_a_repeat_of_a_task_is_not_new_and_the_explanation_says_so() -> None:
    scorer = kp.Scorer(embedder=HashingEmbedder())
    first, repeat, other = scorer.score_many([attempt(1, 0), attempt(1, 1), attempt(2, 0)])
    assert first.novelty == 0.5 and first.novelty_source == "empty_cache"
    assert repeat.novelty_by == "task"
    assert repeat.nearest is not None and repeat.nearest.id == "kp:trace:task1-try0"
    assert repeat.nearest_relation == "same_task_same_way"
    assert repeat.novelty == 0.0
    assert "nearest kp:trace:task1-try0: same task, done the same way" in repeat.explanation
    assert other.nearest_relation == "other_task"
    assert other.novelty > 0.5
    record = kp.ScoreRecord.of(repeat, kp.parse_trace(attempt(1, 1))).to_dict()
    assert record["novelty_by"] == "task"
    assert record["nearest_relation"] == "same_task_same_way"
    assert kp.ValueScore.from_record(record).explanation == repeat.explanation


def test_a_copy_has_novelty_zero() -> None:
    scorer = kp.Scorer(embedder=HashingEmbedder())
    original = attempt(4, 0)
    copy = dict(original, id="kp:trace:copy")
    _, again = scorer.score_many([original, copy])
    assert again.copy_of is not None and again.novelty == 0.0
    assert again.nearest_relation == "copy"


def test_the_seed_novelty_stays_by_name() -> None:
    embedder = HashingEmbedder()
    traces = [attempt(1, 0), attempt(2, 0)]
    seed = kp.Scorer(embedder=embedder, novelty="seed").score_many(traces)[1]
    vectors = embedder.embed([kp.parse_trace(t).embedding_text for t in traces])
    assert seed.novelty == pytest.approx(1.0 - float(vectors[0] @ vectors[1]), abs=1e-6)
    assert seed.novelty_by == "seed" and seed.nearest_relation is None
    with pytest.raises(ValueError, match="novelty must be task or seed"):
        kp.Scorer(embedder=embedder, novelty="whole")  # type: ignore[arg-type]


def test_a_base_of_whole_trace_vectors_is_migrated_to_task_vectors(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = HashingEmbedder()
    location = tmp_path / "old.sqlite"
    seed_identity = EmbeddingIdentity.of(embedder, "seed")
    with open_knowledge_base(location, seed_identity) as kb:
        kp.Scorer(embedder=embedder, memory=kb, novelty="seed").score_many(
            [attempt(1, 0), attempt(2, 0)]
        )
        with pytest.raises(KnowledgeBaseMismatchError, match="its vectors are of whole traces"):
            kp.Scorer(embedder=embedder, memory=kb)
    with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
        kb = open_knowledge_base(location, EmbeddingIdentity.of(embedder))
    with kb:
        assert kb.identity is not None and kb.identity.text == "task/1"
        assert len(kb) == 2
        stored = kb.get("kp:trace:task1-try0")
        assert stored is not None
        wanted = embedder.embed([task_text(kp.parse_trace(stored.trace)).text])[0]
        np.testing.assert_allclose(stored.vector, wanted, atol=1e-6)
        repeat = kp.Scorer(embedder=embedder, memory=kb).score(attempt(1, 1))
        assert repeat.nearest is not None and repeat.nearest.id == "kp:trace:task1-try0"
        assert repeat.nearest_relation == "same_task_same_way"
    assert "its 2 traces' vectors were of whole traces" in caplog.text
    with (
        pytest.raises(KnowledgeBaseMismatchError, match="of task texts, not"),
        open_knowledge_base(location, seed_identity),
    ):
        pass


def test_kp_score_says_which_novelty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(attempt(1, k)) + "\n" for k in range(2)))
    for novelty in ("task", "seed"):
        code = main(["score", str(path), "--embedder", "static", "--novelty", novelty, "-q"])
        assert code == 0
        lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert [line.get("novelty_by") for line in lines] == [novelty, novelty]
