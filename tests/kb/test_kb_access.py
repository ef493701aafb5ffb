"""API keys, settings and reads filtered by visibility: every backend passes these same tests."""

from __future__ import annotations

from typing import Any

import pytest

import knowledgepulse as kp
from _helpers import HashingEmbedder, make_trace, score_record
from knowledgepulse.kb import ApiKey, EmbeddingIdentity, StoredTrace, Viewer, open_knowledge_base
from knowledgepulse.kb._sql import SQLKnowledgeBase

IDENTITY = EmbeddingIdentity(model="hashing", dimensions=384, windowing="whole")


def stored(
    trace_id: str, visibility: str, owner: str, org: str | None, **parts: Any
) -> StoredTrace:
    trace = make_trace(trace_id=trace_id, **parts)
    trace["metadata"]["visibility"] = visibility
    vector = HashingEmbedder().embed([kp.parse_trace(trace).embedding_text])[0]
    score = float(len(trace_id)) / 100
    return StoredTrace(
        id=trace_id,
        trace=trace,
        vector=vector,
        record=score_record(trace_id, score),
        visibility=visibility,
        owner=owner,
        org=org,
    )


def test_a_key_is_stored_hashed_verified_and_revoked(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        key, secret = kb.create_api_key("ci", "contribute", org="acme")
        assert secret.startswith(f"kp_{key.id}_") and len(secret) > 40
        assert kb.verify_api_key(secret) == key
        assert kb.verify_api_key(secret + "x") is None
        assert kb.verify_api_key(f"kp_{key.id}_wrong") is None
        assert kb.verify_api_key("not a key") is None
        with pytest.raises(ValueError, match="a key named 'ci' exists already"):
            kb.create_api_key("ci", "read")
        with pytest.raises(ValueError, match="scope must be one of read, contribute, admin"):
            kb.create_api_key("other", "owner")
        assert isinstance(kb, SQLKnowledgeBase)  # both backends: the raw rows are readable
        rows = kb._select("SELECT hash FROM api_keys")
        assert secret not in str(rows)
        assert kb.revoke_api_key("ci") is True
        assert kb.revoke_api_key("ci") is False
        assert kb.verify_api_key(secret) is None
        assert [k.name for k in kb.api_keys()] == ["ci"]
        assert kb.api_keys()[0].revoked_at is not None


def test_scopes_are_ordered() -> None:
    key = ApiKey("1", "n", "contribute", None, "now")
    assert (key.allows("read"), key.allows("contribute"), key.allows("admin")) == (
        True,
        True,
        False,
    )


def test_settings_are_kept_in_the_base(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        assert kb.setting("threshold") is None
        kb.set_setting("threshold", "0.5")
        kb.set_setting("threshold", "0.7")
    with open_knowledge_base(kb_location) as kb:
        assert kb.setting("threshold") == "0.7"


def test_listing_stats_and_search_show_only_what_the_viewer_may_see(kb_location: str) -> None:
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        kb.add_many(
            [
                stored("kp:trace:net", "network", "a", "acme", objective="Plan a 100% trip"),
                stored("kp:trace:org-acme", "org", "a", "acme", domain="finance"),
                stored("kp:trace:private-a", "private", "a", "acme"),
                stored("kp:trace:private-b", "private", "b", "acme", objective="Summarise revenue"),
            ]
        )
        alice, bob = Viewer("a", "acme"), Viewer("b", "acme")
        carol, admin = Viewer("c", "other"), Viewer("z", None, sees_all=True)

        def ids(viewer: Viewer, **options: object) -> list[str]:
            items, total = kb.list_traces(viewer, **options)  # type: ignore[arg-type]
            assert total == len(items)
            return [item.id for item in items]

        assert ids(alice, sort="added_at") == [
            "kp:trace:net",
            "kp:trace:org-acme",
            "kp:trace:private-a",
        ]
        assert ids(bob, sort="added_at") == [
            "kp:trace:net",
            "kp:trace:org-acme",
            "kp:trace:private-b",
        ]
        assert ids(carol) == ["kp:trace:net"]
        assert len(ids(admin)) == 4
        # value = len(id)/100: private-a and -b tie at 0.18; ties by when added, same direction.
        assert ids(admin, sort="-value") == [
            "kp:trace:private-b",
            "kp:trace:private-a",
            "kp:trace:org-acme",
            "kp:trace:net",
        ]
        assert ids(alice, domain="finance") == ["kp:trace:org-acme"]
        assert ids(alice, text="100%") == ["kp:trace:net"]
        assert ids(alice, text="PLAN A") == ["kp:trace:net"]
        assert ids(alice, text="_") == []
        page, total = kb.list_traces(admin, sort="added_at", limit=2, offset=1)
        assert ([item.id for item in page], total) == (
            ["kp:trace:org-acme", "kp:trace:private-a"],
            4,
        )
        assert page[0].objective == "Review PR #42 for security issues"
        assert page[0].record == score_record("kp:trace:org-acme", 0.17)

        assert kb.visible_stats(carol)["traces"] == 1
        assert kb.visible_stats(alice)["by_domain"] == {"code-review": 2, "finance": 1}

        private_b = kb.get("kp:trace:private-b")
        assert private_b is not None
        query = private_b.vector
        assert [hit.id for hit in kb.search_visible(query, 2, carol)] == ["kp:trace:net"]
        assert kb.search_visible(query, 1, bob)[0].id == "kp:trace:private-b"
        assert "kp:trace:private-b" not in [hit.id for hit in kb.search_visible(query, 4, alice)]
        assert set(kb.access_of(["kp:trace:net", "kp:trace:nope"])) == {"kp:trace:net"}


def test_a_search_for_a_viewer_looks_through_a_bounded_window(
    kb_location: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from knowledgepulse.kb import _keys

    monkeypatch.setattr(_keys, "SEARCH_WINDOW", 2)
    with open_knowledge_base(kb_location, IDENTITY) as kb:
        kb.add_many(
            [
                stored("kp:trace:a1", "private", "a", None, objective="alpha"),
                stored("kp:trace:a2", "private", "a", None, objective="alpha beta"),
                stored("kp:trace:b", "network", "b", None, objective="gamma"),
            ]
        )
        a1 = kb.get("kp:trace:a1")
        assert a1 is not None
        query = a1.vector
        # The two nearest are a's: within a window of 2, another viewer finds nothing.
        assert kb.search_visible(query, 1, Viewer("c")) == []
        assert [hit.id for hit in kb.search_visible(query, 3, Viewer("a"))] == [
            "kp:trace:a1",
            "kp:trace:a2",
        ]
