"""Copy facets in a knowledge base (SQLite and PostgreSQL): stored with every trace, found for
a new trace, made for traces stored before they existed (migration), remade for another
scheme."""

from __future__ import annotations

import copy
import logging
from typing import Any

import numpy as np
import pytest

import knowledgepulse as kp
from _helpers import make_trace
from knowledgepulse.copies import COPY_SIMILARITY, DEFAULT_SCHEME, copy_facet
from knowledgepulse.kb import EmbeddingIdentity, StoredTrace, open_knowledge_base

IDENTITY = EmbeddingIdentity(model="hashing", dimensions=8, windowing="whole")


def trace(i: int, words: int = 40) -> dict[str, Any]:
    text = " ".join(f"t{i}w{k}" for k in range(words))
    return make_trace(
        trace_id=f"kp:trace:{i}",
        objective=f"task {i}",
        steps=[{"type": "thought", "content": text}],
    )


def stored(t: dict[str, Any]) -> StoredTrace:
    return StoredTrace(id=t["id"], trace=t, vector=np.eye(8, dtype=np.float32)[0])


def near_copy_of(t: dict[str, Any], changed: int) -> kp.ReasoningTrace:
    data = copy.deepcopy(t)
    data["id"] += ":copy"
    words = data["steps"][0]["content"].split()
    for k in range(changed):
        words[k * 7] = f"other{k}"
    data["steps"][0]["content"] = " ".join(words)
    return kp.parse_trace(data)


def test_a_copy_of_a_stored_trace_is_found(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as base:
        assert base.add_many([stored(trace(i)) for i in range(5)]) == 5
        exact = copy.deepcopy(trace(3))
        exact["id"] = "kp:trace:elsewhere"
        found = base.stored_copy(copy_facet(kp.parse_trace(exact)), COPY_SIMILARITY)
        assert found is not None
        assert (found.id, found.similarity, found.relation) == ("kp:trace:3", 1.0, "exact")
        near = base.stored_copy(copy_facet(near_copy_of(trace(2), 2)), COPY_SIMILARITY)
        assert near is not None and (near.id, near.relation) == ("kp:trace:2", "near_copy")
        assert COPY_SIMILARITY <= near.similarity < 1.0
        assert base.stored_copy(copy_facet(kp.parse_trace(trace(9))), COPY_SIMILARITY) is None
        # A trace with no word is nobody's copy.
        empty = make_trace(objective="?", steps=[{"type": "thought"}], summary="")
        assert base.stored_copy(copy_facet(kp.parse_trace(empty)), COPY_SIMILARITY) is None
        base.clear()
        assert base.stored_copy(copy_facet(kp.parse_trace(exact)), COPY_SIMILARITY) is None


def _sql(base: Any) -> Any:
    """The SQL frame of a base (its private statements, to make an older base's shape)."""
    return base


def test_a_base_made_before_copy_facets_is_migrated(
    kb_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as base:
        base.add_many([stored(trace(i)) for i in range(4)])
        # As a base of the previous format: no copy tables, no scheme recorded.
        with _sql(base)._write():
            _sql(base)._execute("DROP TABLE copy_bands")
            _sql(base)._execute("DROP TABLE copy_facets")
            _sql(base)._execute("DELETE FROM kb_meta WHERE key = 'copy_scheme'")
    caplog.set_level(logging.WARNING, logger="knowledgepulse")
    with open_knowledge_base(kb_location) as base:
        assert len(base) == 4  # nothing lost
        found = base.stored_copy(copy_facet(near_copy_of(trace(1), 1)), COPY_SIMILARITY)
        assert found is not None and found.id == "kp:trace:1"
    assert "making the copy facets of 4 stored traces" in caplog.text
    with open_knowledge_base(kb_location) as base:
        rows = _sql(base)._select("SELECT COUNT(*) FROM copy_facets")
        assert rows[0][0] == 4
        bands = _sql(base)._select("SELECT COUNT(*) FROM copy_bands")
        assert bands[0][0] == 4 * DEFAULT_SCHEME.bands
        scheme = _sql(base)._select("SELECT value FROM kb_meta WHERE key = 'copy_scheme'")
        assert scheme[0][0] == DEFAULT_SCHEME.label


def test_facets_made_by_another_scheme_are_remade_naming_both(
    kb_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as base:
        base.add_many([stored(trace(i)) for i in range(3)])
        with _sql(base)._write():
            _sql(base)._execute(
                "UPDATE kb_meta SET value = 'minhash-old;shingle=3' WHERE key = 'copy_scheme'"
            )
            _sql(base)._execute("DELETE FROM copy_bands")
    caplog.set_level(logging.WARNING, logger="knowledgepulse")
    with open_knowledge_base(kb_location) as base:
        found = base.stored_copy(copy_facet(near_copy_of(trace(0), 1)), COPY_SIMILARITY)
        assert found is not None and found.id == "kp:trace:0"
    assert "copy facets were made with minhash-old;shingle=3; remaking them with" in caplog.text
    assert DEFAULT_SCHEME.label in caplog.text


def test_a_base_of_the_scheme_before_message_sketches_is_remade_and_finds_rewordings(
    kb_location: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Facets stored by the previous scheme (no message sketch column, its label) are remade;
    then a rewording of a stored run is found by its steps, and the run's re-run is not."""
    from copies.test_copy_facet import (
        _AGENT,
        _AGENT_AGAIN,
        _AGENT_REWORDED,
        _USER,
        _USER_REWORDED,
        refund_run,
    )

    run = refund_run("kp:trace:run", _USER, _AGENT)
    before = DEFAULT_SCHEME.label.split(";steps=")[0] + (
        ";steps=2calls;reworded=0.17;contained=0.85@0.25"
    )
    with open_knowledge_base(kb_location, IDENTITY) as base:
        base.add_many([stored(run)])
        sql = _sql(base)
        blob, mark = sql.dialect.blob_type, sql.dialect.mark
        with sql._write():  # as the previous scheme made them
            sql._execute("DROP TABLE copy_facets")
            sql._execute(
                f"CREATE TABLE copy_facets (id TEXT PRIMARY KEY, digest {blob} NOT NULL, "
                f"signature {blob}, steps {blob})"
            )
            sql._execute(f"UPDATE kb_meta SET value = {mark} WHERE key = 'copy_scheme'", [before])
    caplog.set_level(logging.WARNING, logger="knowledgepulse")
    with open_knowledge_base(kb_location) as base:
        reworded = copy_facet(
            kp.parse_trace(refund_run("kp:trace:reworded", _USER_REWORDED, _AGENT_REWORDED))
        )
        found = base.stored_copy(reworded, COPY_SIMILARITY)
        assert found is not None
        assert (found.id, round(found.similarity, 6)) == ("kp:trace:run", 0.406241)
        rerun = copy_facet(kp.parse_trace(refund_run("kp:trace:rerun", _USER, _AGENT_AGAIN)))
        assert base.stored_copy(rerun, COPY_SIMILARITY) is None
    assert f"copy facets were made with {before}; remaking them with" in caplog.text
