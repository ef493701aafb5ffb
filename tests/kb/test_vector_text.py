"""A base records what text its vectors are of; a base of whole-trace vectors (made before
the task facet) is migrated to task-text vectors, on both backends, nothing else touched."""

from __future__ import annotations

import logging

import numpy as np
import pytest

import knowledgepulse as kp
from _helpers import HashingEmbedder, make_trace
from knowledgepulse.kb import (
    EmbeddingIdentity,
    KnowledgeBaseMismatchError,
    StoredTrace,
    open_knowledge_base,
)
from knowledgepulse.tasks import task_text


def stored(i: int, embedder: HashingEmbedder) -> StoredTrace:
    trace = make_trace(trace_id=f"kp:trace:old-{i}", objective=f"old task {i} about item {i}")
    whole = kp.parse_trace(trace).embedding_text
    return StoredTrace(id=trace["id"], trace=trace, vector=embedder.embed([whole])[0])


def test_an_old_base_is_migrated_once_in_place(
    kb_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    embedder = HashingEmbedder()
    with open_knowledge_base(kb_location, EmbeddingIdentity.of(embedder, "seed")) as kb:
        assert kb.add_many([stored(i, embedder) for i in range(3)]) == 3
        before = {t.id: t.record for t in kb.iter_stored()}
    with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
        kb = open_knowledge_base(kb_location, EmbeddingIdentity.of(embedder))
    with kb:
        assert kb.identity is not None and kb.identity.text == "task/1"
        for item in kb.iter_stored():
            text = task_text(kp.parse_trace(item.trace)).text
            np.testing.assert_allclose(item.vector, embedder.embed([text])[0], atol=1e-6)
            assert item.record == before[item.id]
        assert kb.check() == []
    assert caplog.text.count("traces' vectors were of whole traces") == 1
    assert "its 3 traces' vectors" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="knowledgepulse"):
        open_knowledge_base(kb_location, EmbeddingIdentity.of(embedder)).close()
    assert "vectors were of whole traces" not in caplog.text  # once is enough


def test_a_base_of_task_vectors_refuses_whole_trace_vectors(kb_location: str) -> None:
    embedder = HashingEmbedder()
    open_knowledge_base(kb_location, EmbeddingIdentity.of(embedder)).close()
    with pytest.raises(KnowledgeBaseMismatchError, match=r"of task texts, not .* of whole traces"):
        open_knowledge_base(kb_location, EmbeddingIdentity.of(embedder, "seed"))


def test_without_the_embedder_an_old_base_is_refused_not_changed(kb_location: str) -> None:
    embedder = HashingEmbedder()
    with open_knowledge_base(kb_location, EmbeddingIdentity.of(embedder, "seed")) as kb:
        kb.add_many([stored(0, embedder)])
    bare = EmbeddingIdentity(model="HashingEmbedder", dimensions=384, windowing="first_window")
    with pytest.raises(KnowledgeBaseMismatchError, match=r"of whole traces, not .* of task texts"):
        open_knowledge_base(kb_location, bare)
    with open_knowledge_base(kb_location) as kb:
        assert kb.identity is not None and kb.identity.text == "trace"
